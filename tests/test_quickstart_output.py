"""What `workbench quickstart` prints: the notebook's own output, not papermill's cell markers or
the kernel's plain-TCP warning (issue 43). Run on a three-cell stand-in for notebook 00, through the
real command, papermill and a real kernel, in a process of its own (the kernel's stderr is its)."""

import subprocess
import sys
import textwrap

import nbformat


def test_quickstart_prints_the_notebooks_output_and_no_papermill_or_kernel_noise(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    params = nbformat.v4.new_code_cell('preset = "tiny"\nseed = 0\ndb = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell('print(f"round 1 of 2 at {preset}")'),
                nbformat.v4.new_code_cell('import pandas as pd\npd.DataFrame({"val_em": [0.25]})')]
    nbformat.write(nb, notebooks / "00_quickstart.ipynb")
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from workbench import paths
        paths.notebooks_dir = lambda: Path({str(notebooks)!r})
        from workbench.cli import main
        sys.exit(main(["quickstart", "--preset", "smoke"]))
    """)
    env = {"WORKBENCH_DATA": str(tmp_path / "data"), "WORKBENCH_RUNS": str(tmp_path / "runs"),
           "WORKBENCH_FIGURES": str(tmp_path / "figures"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**env, "PATH": f"{sys.prefix}/bin:{env['PATH']}"})
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "round 1 of 2 at smoke" in text and "val_em" in text and "0.25" in text, text
    for noise in ("Executing Cell", "Ending Cell", "TCP without encryption", "Input Notebook"):
        assert noise not in text, f"{noise!r} printed:\n{text}"
