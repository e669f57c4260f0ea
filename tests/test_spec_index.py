"""The lazy spec index (issue #28): a name resolves by parsing only the file it names, with the answer
a full parse of every file gives (same file, same errors, same suggestions).

The line scan (:mod:`roofline.specs.index`) may only answer None (unsure) or claim names a file's YAML
does not hold; it must never miss a name the YAML declares, and the library checks every file it loads
against the scan.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline
from roofline.errors import RooflineError, SpecError, UnknownNameError
from roofline.specs import library
from roofline.specs.hardware import HardwareSpec
from roofline.specs.index import scan_names
from roofline.specs.library import bundled_dir, load_spec_file
from roofline.specs.model import ModelSpec

BUNDLED = {kind: sorted(bundled_dir(kind).glob("*.yaml")) for kind in ("hardware", "model")}
CLS: dict[str, type[HardwareSpec] | type[ModelSpec]] = {"hardware": HardwareSpec, "model": ModelSpec}
H100 = (bundled_dir("hardware") / "h100-sxm.yaml").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bundled specs only, and no index or parse remembered from another test."""
    monkeypatch.delenv("ROOFLINE_SPECS_PATH", raising=False)
    _clear()


def _clear() -> None:
    library._LAZY.clear()
    for fn in (library._parsed, library._file_names_cached, library._scanned_names, library._load_cached):
        fn.cache_clear()


def _parsed_names(path: Path) -> tuple[str, ...]:
    data = library.read_yaml(path)
    assert isinstance(data, dict)
    return (data["name"], *(data.get("aliases") or []))


def _outcome(fn: object) -> tuple[str, object]:
    try:
        return "ok", fn()  # type: ignore[operator]
    except RooflineError as exc:
        return type(exc).__name__, str(exc)


# ---- every bundled name: the scan is sure and right, and lazy == eager -----------------------------
@pytest.mark.parametrize("path", BUNDLED["hardware"] + BUNDLED["model"], ids=lambda p: p.stem)
def test_scan_reads_every_bundled_file_as_the_parser_does(path: Path) -> None:
    assert scan_names(path.read_text(encoding="utf-8")) == _parsed_names(path)


@pytest.mark.parametrize("kind", ["hardware", "model"])
def test_every_bundled_slug_and_alias_resolves_lazily_as_eagerly(kind: library.Kind) -> None:
    names = [n for p in BUNDLED[kind] for n in _parsed_names(p)]
    assert len(names) > len(BUNDLED[kind])
    for name in names + [n.upper() for n in names] + [f"  {n} " for n in names[:3]]:
        eager = library._eager_lookup(kind, name)
        assert library._lookup(kind, name) == eager, name
        loaded = roofline.hardware(name) if kind == "hardware" else roofline.model(name)
        assert loaded == load_spec_file(CLS[kind], eager), name


def test_resolving_two_names_parses_two_files(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[Path] = []
    real = library.read_yaml

    def counting(path: Path, *args: object, **kw: object) -> object:
        parsed.append(Path(path))
        return real(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(library, "read_yaml", counting)
    roofline.model("llama-3.1-8b"), roofline.hardware("h100-sxm")
    assert sorted(p.name for p in parsed) == ["h100-sxm.yaml", "llama-3.1-8b.yaml"]
    roofline.model("meta-llama/Llama-3.1-8B"), roofline.hardware("H100-SXM5")  # warm: nothing parsed again
    assert len(parsed) == 2


@pytest.mark.parametrize("name", ["h100", "h100-sxn", "", "nosuch", "a100"])
def test_unknown_names_say_the_same_with_suggestions(name: str) -> None:
    lazy = _outcome(lambda: library._lookup("hardware", name))
    assert lazy == _outcome(lambda: library._eager_lookup("hardware", name))
    assert lazy[0] == "UnknownNameError"
    with pytest.raises(UnknownNameError, match=r"Run `roofline hardware list`"):
        roofline.hardware(name)


def test_lists_still_load_everything() -> None:
    assert roofline.list_hardware() == sorted(p.stem for p in BUNDLED["hardware"])
    assert roofline.list_models() == sorted(p.stem for p in BUNDLED["model"])


# ---- user folders: precedence, broken files, fakes, changes -----------------------------------------
def _user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.setenv("ROOFLINE_SPECS_PATH", str(tmp_path))
    _clear()
    return tmp_path


def _same_as_eager(kind: library.Kind, names: list[str]) -> None:
    for name in names:
        lazy = _outcome(lambda name=name: library._lookup(kind, name))
        eager = _outcome(lambda name=name: library._eager_lookup(kind, name))
        assert lazy == eager, name


NO_ALIASES = H100.replace("aliases: [h100-sxm5, h100-sxm-80gb, h100-sxm5-80gb]\n", "")
FAKE_NAME = NO_ALIASES.replace('  source: "Lambda on-demand,', '  source: "Lambda\naliases: [fake-gpu]\nzz: on-demand,')
BROKEN_TAIL = H100.replace("name: h100-sxm\n", "name: mine\n") + "memory: {capacity: [\n"


def test_user_folder_shadows_bundled_names_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = H100.replace("name: h100-sxm\n", "name: mine\n").replace("aliases: [h100-sxm5,", "aliases: [h100-sxm, x,")
    folder = _user(tmp_path, monkeypatch, {"mine.yaml": mine})
    assert library._lookup("hardware", "h100-sxm") == folder / "mine.yaml"
    assert library._lookup("hardware", "h100-sxm-80gb") == folder / "mine.yaml"
    assert library._lookup("hardware", "h200") == bundled_dir("hardware") / "h200-sxm.yaml"
    _same_as_eager("hardware", ["h100-sxm", "mine", "h100-sxm5", "b200", "nope"])


def test_a_name_inside_a_multiline_string_is_not_a_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scan sees 'aliases: [fake-gpu]' at column 0; the YAML holds it inside a string and has no aliases.
    folder = _user(tmp_path, monkeypatch, {"faker.yaml": FAKE_NAME.replace("name: h100-sxm", "name: faker")})
    assert scan_names((folder / "faker.yaml").read_text(encoding="utf-8")) == ("faker", "fake-gpu")
    assert _parsed_names(folder / "faker.yaml") == ("faker",)
    _same_as_eager("hardware", ["fake-gpu", "faker", "h100-sxm"])
    with pytest.raises(UnknownNameError):
        roofline.hardware("fake-gpu")
    assert roofline.hardware("faker").name == "faker"


def test_a_file_broken_past_its_name_breaks_only_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _user(tmp_path, monkeypatch, {"zz.yaml": BROKEN_TAIL, "h100-sxm.yaml": "name: [unclosed\n"})
    _same_as_eager("hardware", ["mine", "zz", "h100-sxm", "h100-sxm5", "b200", "nope"])
    with pytest.raises(UnknownNameError, match=r"zz\.yaml"):
        roofline.hardware("mine")  # not indexed: the full parse fails; the note names the file
    with pytest.raises(SpecError, match=r"zz\.yaml is not valid YAML"):
        roofline.hardware("zz")
    assert roofline.hardware("h100-sxm").name == "h100-sxm"  # a broken file's stem never shadows a name
    assert roofline.hardware("b200").name == "b200"


def test_a_user_alias_claimed_twice_resolves_to_the_last_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = H100.replace("name: h100-sxm\n", "name: one\n").replace("aliases: [h100-sxm5,", "aliases: [dup,")
    two = H100.replace("name: h100-sxm\n", "name: two\n").replace("aliases: [h100-sxm5,", "aliases: [dup,")
    _user(tmp_path, monkeypatch, {"a.yaml": one, "b.yaml": two, "c.yml": one.replace("name: one", "name: three")})
    _same_as_eager("hardware", ["dup", "one", "two", "three", "h100-sxm5"])
    assert roofline.hardware("dup").name == "three"


def test_an_edited_file_is_indexed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _user(tmp_path, monkeypatch, {"mine.yaml": H100.replace("name: h100-sxm\n", "name: mine\n")})
    assert roofline.hardware("mine").name == "mine"
    path = folder / "mine.yaml"
    path.write_text(H100.replace("name: h100-sxm\n", "name: yours\n"), encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a coarse clock would keep the old mtime
    assert roofline.hardware("yours").name == "yours"
    with pytest.raises(UnknownNameError):
        roofline.hardware("mine")
    (folder / "new.yaml").write_text(H100.replace("name: h100-sxm\n", "name: new\n"), encoding="utf-8")
    os.utime(folder, ns=(folder.stat().st_atime_ns, folder.stat().st_mtime_ns + 10**9))
    assert roofline.hardware("new").name == "new"


def test_a_no_break_space_before_a_hash_is_part_of_the_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # YAML starts a comment after a space or tab only: 'a\u00a0#x' is the whole name. Read as 'a' plus a
    # comment, the scan would miss it in f1.yaml and the lookup would stop at f0.yaml, which the parser reads.
    _user(tmp_path, monkeypatch, {"f0.yaml": "name: a\u00a0#x\naliases: ['d']\n", "f1.yaml": "name: a\u00a0#x\n"})
    assert scan_names("name: a\u00a0#x\n") is None
    assert library._lookup("model", "a\u00a0#x") == tmp_path / "f1.yaml"
    _same_as_eager("model", ["a\u00a0#x", "a", "d"])


def test_hostile_user_files_are_refused_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prev = ["", *"abcdefg"]
    bomb = "".join(
        f"{a}: &{a} [{', '.join([f'*{p}' if p else 'lol'] * 9)}]\n" for p, a in zip(prev, "abcdefgh", strict=True)
    )
    bomb += "name: bomb\naliases: *h\n"
    files = {
        "bomb.yaml": bomb,
        "deep.yaml": "name: deep\nx: " + "[" * 1000 + "]" * 1000 + "\n",
        "dupkey.yaml": H100.replace("name: h100-sxm\n", "name: dupkey\n") + "vendor: again\n",
        "latin.yaml": "name: latin\nnote: caf\xe9\n",
        "unknown.yaml": H100.replace("name: h100-sxm\n", "name: unknown\nwarp_drive: 9\n"),
        "intalias.yaml": "name: intalias\naliases: [5]\n",
    }
    folder = _user(tmp_path, monkeypatch, files)
    (folder / "latin.yaml").write_bytes(b"name: latin\nnote: caf\xe9\n")
    (folder / "dir.yaml").mkdir()
    names = ["bomb", "deep", "dupkey", "latin", "unknown", "intalias", "dir", "h100-sxm", "5"]
    _same_as_eager("hardware", names)
    _same_as_eager("model", names)
    for name, match in [("dupkey", "appears twice"), ("unknown", "unknown field"), ("latin", "not UTF-8")]:
        with pytest.raises(SpecError, match=match):
            roofline.hardware(name)
    assert roofline.hardware("h100-sxm").name == "h100-sxm"


# ---- the scan never misses a name the YAML declares -----------------------------------------------------
LINES = [
    "name: a", "name: b", "name: 'c'", 'name: "d"', "name: yes", "name: a # note", "name:", "name: a:b", "name: &x a",
    "aliases: [x, y]", "aliases: [x]  # c", "aliases: []", "aliases:", "aliases: x", "aliases: [1]", "aliases: [x,",
    "  - z", "  - 'q'", "- w", "    - v", "  cont", "  # comment", "", "# top comment", "k: v", 'k: "q', '  k: "q',
    'q"', '  q"', "  nested: 1", "k: |", "  text", "k: [a,", "  b]", "b]", "<<: {name: m}", "---", "\tname: t",
    "name:\tz", "  name: i", "? name", "name : s", "k: 'it''s'", 'k: "a\\"b"', "aliases: !!seq [x]", "x:", "  y: 'p",
    "name: m'", "aliases: [x, [y]]", "k: {a: 1}", "K: 1", "name: A-b.c/d", "...", "- name: n",
    "name: a\u00a0#x", "aliases: [x]\u00a0# c", "\u00a0", "\u00a0name: n", "name: a\x0c", "  \u00a0b", "name: a\u2028b",
]  # fmt: skip


@settings(max_examples=600, derandomize=True, database=None, deadline=None)
@given(lines=st.lists(st.sampled_from(LINES), max_size=12), newline=st.sampled_from(["\n", "\r\n"]))
def test_scan_claims_at_least_what_the_yaml_declares(lines: list[str], newline: str) -> None:
    text = newline.join(lines) + newline
    scanned = scan_names(text)
    if scanned is None:
        return
    try:
        data = library.parse_yaml(text, "fuzz.yaml")
        names = tuple(library._names_of(data, Path("fuzz.yaml")))
    except RooflineError:
        return  # the parser refuses it: a lookup that picks it falls back to the full index
    assert names[0] == scanned[0]
    assert set(names[1:]) <= set(scanned[1:])


FILE_LINES = [
    "name: a", "name: b", "name: c", "aliases: [b]", "aliases: [c, d]", "aliases:", "  - a", "  - d", "k: v",
    "x:", '  y: "p', 'aliases: [a, d]', 'zz: q"', "name: [oops", "aliases: 5", "name: a\u00a0#x", "aliases: ['d']",
    "k: v\nk: w", "",
]  # fmt: skip


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(files=st.lists(st.lists(st.sampled_from(FILE_LINES), max_size=6), min_size=1, max_size=4))
def test_lookups_in_random_folders_answer_as_a_full_parse(files: list[list[str]], tmp_path_factory: Any) -> None:
    folder = tmp_path_factory.mktemp("specs")
    for i, lines in enumerate(files):
        (folder / f"f{i}.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    old = os.environ.get("ROOFLINE_SPECS_PATH")
    os.environ["ROOFLINE_SPECS_PATH"] = str(folder)
    try:
        _clear()
        _same_as_eager("model", ["a", "b", "c", "d", "A", "a\u00a0#x", "f0", "f1", "f2", "f3", "llama-2-7b"])
    finally:
        if old is None:
            os.environ.pop("ROOFLINE_SPECS_PATH", None)
        else:
            os.environ["ROOFLINE_SPECS_PATH"] = old
