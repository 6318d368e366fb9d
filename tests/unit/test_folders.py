"""The product's folders name what they hold: no folder of `shared/mneme` holds more than FOLDER_MOST modules
(`__init__.py` counted), and no file-name prefix stands in for a package (three or more modules of one folder
named `<word>_…` belong in a package `<word>/`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "mneme"
FOLDER_MOST = 16
PREFIX_MOST = 2


def folders() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" not in path.parts:
            found.setdefault(str(path.parent.relative_to(PACKAGE.parent)), []).append(path.stem)
    return found


def test_no_folder_holds_more_than_about_fifteen_modules() -> None:
    wide = {folder: len(names) for folder, names in folders().items() if len(names) > FOLDER_MOST}
    assert not wide, f"split these into packages named for what they hold: {wide}"


def test_no_file_name_prefix_stands_in_for_a_package() -> None:
    prefixed = {}
    for folder, names in folders().items():
        words = Counter(name.split("_")[0] for name in names if "_" in name.strip("_"))
        prefixed.update({f"{folder}/{word}_*": count for word, count in words.items() if count > PREFIX_MOST})
    assert not prefixed, f"make each a package: {prefixed}"
