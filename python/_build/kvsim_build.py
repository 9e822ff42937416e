"""kvsim_build.py — the PEP 517 build backend of the kvsim Python package, standard library only.

Why not setuptools: setuptools releases before 70.1 cannot build a wheel without the separate
`wheel` package, which an offline machine (or a fresh Debian) often lacks, so
`pip install --no-build-isolation --no-index ./python` would fail there. The package is one pure
Python module, so this backend writes its wheel directly: kvsim/*.py plus the dist-info files
(METADATA, WHEEL, RECORD), tag py3-none-any. Name, version, summary and requirements come from
pyproject.toml's [project] table. Also builds an sdist and an editable wheel (a .pth file).
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project():
    text = open(os.path.join(_ROOT, "pyproject.toml"), encoding="utf-8").read()
    block = text.split("[project]", 1)[1].split("\n[", 1)[0]

    def field(key):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), block, re.M)
        if not m:
            raise RuntimeError("pyproject.toml: [project] has no %s" % key)
        return m.group(1)

    return {"name": field("name"), "version": field("version"), "summary": field("description"),
            "requires_python": field("requires-python")}


def _metadata(p):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
            "Provides-Extra: frames\nRequires-Dist: pandas; extra == \"frames\"\n"
            % (p["name"], p["version"], p["summary"], p["requires_python"]))


def _dist_info(p):
    return "%s-%s.dist-info" % (p["name"], p["version"])


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _write_wheel(directory, files):
    p = _project()
    name = "%s-%s-py3-none-any.whl" % (p["name"], p["version"])
    di = _dist_info(p)
    files = list(files) + [
        (di + "/METADATA", _metadata(p).encode()),
        (di + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: kvsim_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (di + "/top_level.txt", b"kvsim\n"),
    ]
    record = "\n".join(_record_line(a, d) for a, d in files) + "\n%s/RECORD,,\n" % di
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            z.writestr(zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0)), data)
        z.writestr(zipfile.ZipInfo(di + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), record)
    return name


def _package_files():
    pkg = os.path.join(_ROOT, "kvsim")
    out = []
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py"):
            with open(os.path.join(pkg, f), "rb") as fh:
                out.append(("kvsim/" + f, fh.read()))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    d = os.path.join(metadata_directory, _dist_info(p))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata(p))
    return _dist_info(p)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("kvsim_editable.pth", (_ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = "%s-%s" % (p["name"], p["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/kvsim_build.py"] + [a for a, _ in _package_files()]:
            data = open(os.path.join(_ROOT, rel), "rb").read()
            info = tarfile.TarInfo(base + "/" + rel)
            info.size = len(data)
            info.mtime = 1577836800
            t.addfile(info, io.BytesIO(data))
        meta = _metadata(p).encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(meta)
        info.mtime = 1577836800
        t.addfile(info, io.BytesIO(meta))
    return name
