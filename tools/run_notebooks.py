"""Run notebooks top to bottom with plain nbclient (as "Run all" does) and report time and memory.

For each notebook it prints the wall time and the kernel's peak resident memory, and exits 1 if any
cell raised. Nothing is written back to the notebooks.

Usage:
    python tools/run_notebooks.py                       # every notebook under notebooks/
    python tools/run_notebooks.py notebooks/01_device_basics.ipynb --markdown
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
_PEAK_CELL = (
    "import resource as _r, sys as _s\n"
    "_k = 1 if _s.platform == 'darwin' else 1024\n"
    "print('PEAK_RSS_BYTES', max(_r.getrusage(_r.RUSAGE_SELF).ru_maxrss, _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss) * _k)"
)


def run_notebook(path: Path, timeout: int = 600, kernel_name: str = "python3") -> dict:
    """Execute one notebook; return its wall time, peak memory and the first error (if any)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_PEAK_CELL))
    client = nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name=kernel_name, resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    wall = time.perf_counter() - start
    text = "".join(output.get("text", "") for output in nb.cells[-1].get("outputs", []))
    found = re.search(r"PEAK_RSS_BYTES\s+(\d+)", text)
    peak = int(found.group(1)) if found else None
    return {"notebook": path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path),
            "wall_s": wall, "peak_bytes": peak, "error": error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: all)")
    parser.add_argument("--kernel", default="python3", help="kernel name (default python3)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table too")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").rglob("*.ipynb"))
    paths = [p.resolve() for p in paths if ".ipynb_checkpoints" not in str(p)]
    results, failed = [], False
    total_start = time.perf_counter()
    for path in paths:
        result = run_notebook(path, kernel_name=args.kernel)
        results.append(result)
        peak = f"{result['peak_bytes'] / 2**20:7.0f} MiB" if result["peak_bytes"] else "      ?"
        status = "ok" if result["error"] is None else f"ERROR: {result['error']}"
        print(f"{result['notebook']:<55} {result['wall_s']:6.1f} s  peak {peak}  {status}", flush=True)
        failed |= result["error"] is not None
    print(f"total {time.perf_counter() - total_start:.1f} s for {len(results)} notebooks")
    if args.markdown:
        print("\n| notebook | CPU wall time | kernel peak memory |\n| --- | --- | --- |")
        for r in results:
            peak = f"{r['peak_bytes'] / 2**20:.0f} MiB" if r["peak_bytes"] else "?"
            print(f"| `{r['notebook']}` | {r['wall_s']:.0f} s | {peak} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
