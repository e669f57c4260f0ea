"""roofline.cli.lazy_help: help renders without markdown-it or pygments, and exactly as with the real modules."""

from __future__ import annotations

import subprocess
import sys

import pytest

HELP = (
    "import sys\n"
    "{pre}"
    "from roofline.cli.app import main\n"
    "sys.argv = ['roofline', *sys.argv[1:]]\n"
    "try:\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "print('LOADED', *sorted(m for m in ('markdown_it', 'pygments', 'rich.markdown', 'rich.traceback') "
    "if m in sys.modules), file=sys.stderr)\n"
)


def _run(args: list[str], pre: str = "") -> tuple[str, str]:
    res = subprocess.run(
        [sys.executable, "-c", HELP.format(pre=pre), *args],
        capture_output=True,
        text=True,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin", "TERM": "dumb"},
        check=False,
    )
    out, _, loaded = res.stderr.rpartition("LOADED")
    return res.stdout + out, loaded.strip()


@pytest.mark.parametrize("args", [["--help"], ["report", "--help"], ["predict", "--bogus"], ["nosuch"]])
def test_help_skips_markdown_and_pygments_and_is_unchanged(args: list[str]) -> None:
    text, loaded = _run(args)
    assert loaded == ""  # none of the deferred modules (nor what they import) was loaded
    real, loaded_real = _run(args, pre="import rich.markdown, rich.traceback\n")  # nothing stood in
    assert "rich.markdown" in loaded_real and "markdown_it" in loaded_real
    assert text == real
    assert "Usage" in text


def test_stand_ins_build_the_real_classes() -> None:
    code = (
        "import sys\n"
        "from roofline.cli import lazy_help\n"
        "lazy_help.install()\n"
        "import typer.rich_utils as ru\n"
        "assert 'rich.markdown' not in sys.modules and 'rich.traceback' not in sys.modules\n"
        "md = ru._make_rich_text(text='# Title\\n\\n*x*', markup_mode='markdown')\n"
        "import rich.markdown, rich.traceback\n"
        "assert type(md) is rich.markdown.Markdown, type(md)\n"
        "assert not isinstance(sys.modules['rich.markdown'], lazy_help.Placeholder)\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError as e:\n"
        "    tb = ru.Traceback.from_exception(type(e), e, e.__traceback__)\n"
        "assert type(tb) is rich.traceback.Traceback\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_install_is_idempotent_and_leaves_other_imports_alone() -> None:
    from roofline.cli import lazy_help

    lazy_help.install()
    lazy_help.install()
    assert sum(isinstance(f, lazy_help.StandInFinder) for f in sys.meta_path) <= 1
    assert lazy_help.StandInFinder().find_spec("rich.markdown", None) is None
