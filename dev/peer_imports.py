"""Files outside a peer method's modules that import one of them: the files one edits to add that
peer (issue 41 counted EoG, Dr. Free and DynaSearcher with it, before and after their folders).

    python dev/peer_imports.py . workbench.peers.eog
    python dev/peer_imports.py OLD_CHECKOUT workbench.method.eog workbench.method.eog_warmstart
"""

import argparse
import ast
from pathlib import Path


def importers(root: Path, prefixes: list[str]) -> list[str]:
    """The ``workbench/`` files under ``root`` that import a module named by (or under) a prefix,
    the peer's own modules left out."""
    def is_peer(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    out = []
    for path in sorted((root / "workbench").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        if is_peer(module):
            continue
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        if any(is_peer(n) for n in names):
            out.append(str(path.relative_to(root)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path)
    p.add_argument("module", nargs="+")
    args = p.parse_args()
    found = importers(args.root, args.module)
    print(len(found), *found, sep="\n")


if __name__ == "__main__":
    main()
