from __future__ import annotations

from pathlib import Path

import pytest

from cemcp_kernel.config import find_project_dir, load_settings
from cemcp_kernel.errors import ConfigError


def test_layers_later_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cemcp.toml").write_text("top_k = 3\n[sandbox]\ntimeout = 10\npool_size = 4\n")
    (tmp_path / ".env").write_text(
        "OPENAI_BASE_URL=http://localhost:9/v1\nCEMCP_SANDBOX__TIMEOUT=20\n"
    )
    monkeypatch.setenv("CEMCP_SANDBOX__POOL_SIZE", "5")
    settings = load_settings(tmp_path, sandbox__pool_size=6)
    assert settings.top_k == 3  # file
    assert settings.model.base_url == "http://localhost:9/v1"  # .env, common name
    assert settings.sandbox.timeout == 20  # .env over file
    assert settings.sandbox.pool_size == 6  # override over environment
    assert settings.workspace_dir == tmp_path / "workspace"


def test_project_found_from_a_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.cemcp]\ntop_k = 2\n")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    assert find_project_dir() == tmp_path
    assert load_settings().top_k == 2


def test_bad_values_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sandbox\.timeout"):
        load_settings(tmp_path, sandbox__timeout="soon")
    settings = load_settings(tmp_path)
    with pytest.raises(ConfigError, match=r"sandbox\.backend"):
        settings.updated({"sandbox.backend": "docker"})
    with pytest.raises(ConfigError, match="nonsense"):
        settings.updated({"nonsense": 1})


def test_secrets_are_never_shown(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, model__api_key="sk-very-secret")
    shown = settings.public_dump()
    assert shown["model"]["api_key"] == "set"
    assert "sk-very-secret" not in repr(settings) and "sk-very-secret" not in str(shown)


def test_list_settings_from_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEMCP_SANDBOX__PACKAGES", '["numpy", "pandas"]')
    settings = load_settings(tmp_path)
    assert settings.sandbox.packages == ["numpy", "pandas"]
    assert settings.updated({"sandbox.packages": '["polars"]'}).sandbox.packages == ["polars"]
    with pytest.raises(ConfigError, match=r"sandbox\.packages"):
        settings.updated({"sandbox.packages": "[not json"})
