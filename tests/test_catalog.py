from __future__ import annotations

from pathlib import Path

from cemcp_kernel.catalog import Discovery

from .conftest import ROOT


def _tool(root: Path, server: str, name: str, source: str) -> Path:
    path = root / "servers" / server / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def test_bundled_calculator_is_discovered_without_importing() -> None:
    catalog = Discovery().discover(ROOT / "servers", ROOT / "skills")
    add = catalog.get("calculator.add")
    assert add is not None
    assert add.signature == "def add(a: float, b: float) -> float"
    assert add.import_line == "from servers.calculator.add import add"
    assert [p.name for p in add.params] == ["a", "b"] and all(p.required for p in add.params)


def test_tool_code_is_never_run_and_broken_files_are_reported(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    _tool(
        tmp_path,
        "evil",
        "boom",
        f"open({str(marker)!r}, 'w').write('x')\ndef boom() -> None:\n    'Explodes.'\n",
    )
    _tool(tmp_path, "evil", "broken", "def broken(:\n")
    _tool(
        tmp_path,
        "good",
        "echo",
        "def echo(text: str, times: int = 1) -> str:\n    '''Repeat text.'''\n    return text * times\n\ndef _private(): ...\n",
    )
    catalog = Discovery().discover(tmp_path / "servers", None)
    assert not marker.exists()
    assert sorted(t.qualname for t in catalog.tools) == ["evil.boom", "good.echo"]
    assert len(catalog.problems) == 1 and "broken.py" in catalog.problems[0].path
    assert "line 1" in catalog.problems[0].message
    echo = catalog.get("good.echo")
    assert echo is not None and echo.params[1].default == "1" and not echo.params[1].required


def test_parsed_files_are_cached_by_content(tmp_path: Path) -> None:
    path = _tool(tmp_path, "s", "t", "def t() -> int:\n    'One.'\n    return 1\n")
    cache = tmp_path / "cache.json"
    first = Discovery(cache).discover(tmp_path / "servers", None)
    assert cache.exists()
    second = Discovery(cache).discover(tmp_path / "servers", None)
    assert first.tools == second.tools
    path.write_text("def t(x: int) -> int:\n    'Changed.'\n    return x\n")
    third = Discovery(cache).discover(tmp_path / "servers", None)
    assert third.tools[0].description == "Changed."
