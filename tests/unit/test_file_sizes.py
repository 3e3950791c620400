"""No product file (dm_core, plugins, dags, spark_jobs) is over 800 lines: past that a
module holds more than one job, and a newcomer can no longer read it in one sitting.
Split a file that grows past it by job (one stage, one module), not at an arbitrary line."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("dm_core", "plugins", "dags", "spark_jobs")
MAX_LINES = 800


def test_no_product_file_is_over_800_lines():
    sizes = {f.relative_to(ROOT): len(f.read_text().splitlines())
             for d in PRODUCT for f in (ROOT / d).rglob("*.py")}
    assert len(sizes) > 100, "the walk found the product files"
    over = sorted((n, str(f)) for f, n in sizes.items() if n > MAX_LINES)
    assert not over, f"files over {MAX_LINES} lines (split them by job):\n" + "\n".join(f"{f}: {n}" for n, f in over)
