"""Generates the Python stubs from loadfleet/v1/*.proto before packaging.

The stubs are build output (python/loadfleet/v1/, ignored by git), never edited by
hand. Generation runs on every build, editable or not, so an install always matches
the .proto files.
"""

from pathlib import Path

from grpc_tools import protoc
from setuptools import setup

HERE = Path(__file__).resolve().parent
OUT = HERE / "python"


def generate_stubs() -> None:
    protos = sorted(str(p.relative_to(HERE)) for p in (HERE / "loadfleet" / "v1").glob("*.proto"))
    (OUT / "loadfleet" / "v1").mkdir(parents=True, exist_ok=True)
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{HERE}",
        f"-I{include}",
        f"--python_out={OUT}",
        f"--pyi_out={OUT}",
        f"--grpc_python_out={OUT}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed on " + " ".join(protos))
    (OUT / "loadfleet" / "v1" / "__init__.py").write_text('"""Generated protobuf stubs; see proto/loadfleet/v1."""\n')


generate_stubs()
setup()
