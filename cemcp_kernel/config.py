"""One settings model, layered: defaults < project file < .env < environment < run-time overrides.

The project file is ``cemcp.toml`` or the ``[tool.cemcp]`` table of ``pyproject.toml``, found by
walking up from the working directory, so a notebook in ``notebooks/`` uses its project's tools.
Environment names are the ones users already have (``OPENAI_API_KEY``, ``AZURE_OPENAI_*``) plus
``CEMCP_<SECTION>__<KEY>`` for everything else.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from .errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelSettings(_Section):
    """Where code comes from: an OpenAI-compatible endpoint, or none (rule-based generation)."""

    name: str = "gpt-4o-mini"
    api_key: SecretStr | None = None
    base_url: str | None = None
    azure_endpoint: str | None = None
    azure_api_key: SecretStr | None = None
    azure_deployment: str | None = None
    azure_api_version: str = "2024-10-21"
    timeout: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0)
    max_tokens: int = Field(2048, gt=0)
    temperature: float | None = 0.0

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.azure_api_key or self.base_url or self.azure_endpoint)

    @property
    def endpoint(self) -> str:
        """A short human description of the endpoint, never including a key."""
        if self.azure_endpoint:
            return f"Azure OpenAI {self.azure_endpoint} (deployment {self.azure_deployment})"
        if self.base_url:
            return f"{self.base_url} (model {self.name})"
        if self.api_key:
            return f"OpenAI (model {self.name})"
        return "none: rule-based generator"


class SandboxSettings(_Section):
    """Which isolation runs generated code, and the limits of one execution."""

    backend: Literal["auto", "bubblewrap", "microsandbox"] = "auto"
    pool_size: int = Field(2, ge=0, le=64)
    timeout: float = Field(60.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    max_processes: int = Field(64, ge=4)
    max_output_bytes: int = Field(1_000_000, ge=1024)
    tmp_size_mb: int = Field(256, ge=1)
    packages: list[str] = Field(default_factory=list)  # importable inside, e.g. ["pandas"]
    # microsandbox: an OCI image, or a host directory used as the microVM's root filesystem
    # (wins over image); a remote service instead of this host when an API key is set.
    image: str = "python"
    rootfs: Path | None = None
    microsandbox_url: str | None = None
    microsandbox_api_key: SecretStr | None = None


class SelectionSettings(_Section):
    """How tools are chosen for a request (BM25 always; dense embeddings with the semantic extra)."""

    semantic: bool = True
    # Wait for the model and the catalog's embeddings instead of answering with BM25 meanwhile:
    # for headless runs (CI, recorded notebooks) whose selection must not depend on timing.
    wait: bool = False


class Settings(_Section):
    """Everything cemcp reads; paths are absolute after loading."""

    project_dir: Path
    servers_dir: Path
    skills_dir: Path
    workspace_dir: Path
    review: Literal["ask", "auto"] = "ask"
    top_k: int = Field(5, ge=1, le=50)
    selection: SelectionSettings = Field(default_factory=SelectionSettings)
    tool_timeout: float = Field(30.0, gt=0)  # seconds one call to a live MCP server may take
    model: ModelSettings = Field(default_factory=ModelSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)

    def updated(self, overrides: dict[str, Any]) -> Settings:
        """A copy with dotted keys (``sandbox.timeout``) replaced, validated as a whole."""
        data = self.model_dump()
        for key, value in overrides.items():
            _set_dotted(data, key, value)
        for key in _PATH_KEYS:
            data[key] = str((self.project_dir / Path(data[key]).expanduser()).resolve())
        return _validate(data)

    def public_dump(self) -> dict[str, Any]:
        """Settings as shown to users: secrets reported as set or not, never their value."""
        data = self.model_dump(mode="json")
        for section in ("model", "sandbox"):
            for key, value in data[section].items():
                if "key" in key:
                    data[section][key] = "set" if value else None
        return data


# Environment names users already have, mapped onto settings keys.
_ENV_ALIASES = {
    "OPENAI_API_KEY": "model.api_key",
    "OPENAI_BASE_URL": "model.base_url",
    "OPENAI_MODEL": "model.name",
    "AZURE_OPENAI_ENDPOINT": "model.azure_endpoint",
    "AZURE_OPENAI_API_KEY": "model.azure_api_key",
    "AZURE_OPENAI_DEPLOYMENT_NAME": "model.azure_deployment",
    "AZURE_OPENAI_API_VERSION": "model.azure_api_version",
}
_PATH_KEYS = ("servers_dir", "skills_dir", "workspace_dir")
# CEMCP_ variables that locate things rather than set them.
_NOT_SETTINGS = {"CEMCP_PROJECT_DIR", "CEMCP_CACHE_DIR"}


def find_project_dir(start: Path | None = None) -> Path:
    """The nearest folder holding ``cemcp.toml`` or a pyproject with ``[tool.cemcp]``."""
    if env := os.environ.get("CEMCP_PROJECT_DIR"):
        return Path(env).expanduser().resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "cemcp.toml").is_file() or "cemcp" in _read_pyproject_tool(folder):
            return folder
    return here


def load_settings(project_dir: Path | None = None, **overrides: Any) -> Settings:
    """Read every source in order; raise ConfigError with the offending key on bad values."""
    project = (project_dir or find_project_dir()).resolve()
    data: dict[str, Any] = {
        "project_dir": str(project),
        "servers_dir": "servers",
        "skills_dir": "skills",
        "workspace_dir": "workspace",
    }
    _merge(data, _read_project_file(project))
    env = {k: v for k, v in dotenv_values(project / ".env").items() if v is not None}
    env.update(os.environ)
    for name, value in env.items():
        if name in _ENV_ALIASES and value:
            _set_dotted(data, _ENV_ALIASES[name], value)
        elif name.startswith("CEMCP_") and name not in _NOT_SETTINGS:
            _set_dotted(data, name[6:].lower().replace("__", "."), value)
    for key, value in overrides.items():
        _set_dotted(data, key.replace("__", "."), value)
    for key in _PATH_KEYS:
        data[key] = str((project / Path(data[key]).expanduser()).resolve())
    sandbox = data.get("sandbox")
    if isinstance(sandbox, dict) and sandbox.get("rootfs"):
        sandbox["rootfs"] = str((project / Path(sandbox["rootfs"]).expanduser()).resolve())
    return _validate(data)


def _validate(data: dict[str, Any]) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"Invalid cemcp setting: {problems}") from None


def _read_pyproject_tool(folder: Path) -> dict[str, Any]:
    path = folder / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text()).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _read_project_file(project: Path) -> dict[str, Any]:
    path = project / "cemcp.toml"
    if path.is_file():
        try:
            return tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    return dict(_read_pyproject_tool(project).get("cemcp", {}))


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c``; text that looks like a JSON list or object (from the environment or
    ``%mcp_config``) is parsed, so list settings can be given there."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            value = json.loads(value)
        except ValueError:
            pass  # validation says what is wrong with it
    *parents, leaf = key.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"Unknown cemcp setting: {key}")
    node[leaf] = value


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
