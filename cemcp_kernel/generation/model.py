"""Code from any OpenAI-compatible chat endpoint, through the ``openai`` client.

The client retries 429 and 5xx with backoff and enforces the timeout. Endpoints disagree on
parameters (``max_tokens`` against ``max_completion_tokens``, ``temperature`` on reasoning
models, ``stream_options``): a 400 that names one of them adjusts the request and tries again,
and the adjustment is remembered for the generator's lifetime.
"""

from __future__ import annotations

import re
from typing import Any

from ..config import ModelSettings
from ..errors import GenerationError
from . import GeneratedCode, TokenCallback
from .extract import check_code, extract_code
from .prompt import PromptContext

_REPLY_SHOWN = 1500
# OpenAI's reasoning models take max_completion_tokens only; everything else max_tokens. Either
# guess is corrected by the endpoint's 400, so a wrong guess costs one request.
_COMPLETION_TOKENS_MODELS = re.compile(r"^(o\d|gpt-5)", re.I)


class ModelGenerator:
    name = "model"

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._client: Any = None
        limit = (
            "max_completion_tokens" if _COMPLETION_TOKENS_MODELS.match(self.model) else "max_tokens"
        )
        self._params: dict[str, Any] = {limit: settings.max_tokens}
        if settings.temperature is not None:
            self._params["temperature"] = settings.temperature
        self._stream_usage = True

    @property
    def model(self) -> str:
        return self.settings.azure_deployment or self.settings.name

    def client(self) -> Any:
        if self._client is None:
            from openai import AsyncAzureOpenAI, AsyncOpenAI

            s = self.settings
            common = {"timeout": s.timeout, "max_retries": s.max_retries}
            if s.azure_endpoint:
                self._client = AsyncAzureOpenAI(
                    azure_endpoint=s.azure_endpoint,
                    api_key=_secret(s.azure_api_key) or _secret(s.api_key),
                    api_version=s.azure_api_version,
                    azure_deployment=s.azure_deployment,
                    **common,
                )
            else:
                # Local servers (Ollama, llama.cpp) need no key, but the client insists on one.
                key = _secret(s.api_key) or "no-key"
                self._client = AsyncOpenAI(api_key=key, base_url=s.base_url, **common)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client on the loop that used it."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def generate(
        self, context: PromptContext, on_token: TokenCallback | None = None
    ) -> GeneratedCode:
        messages = context.messages()
        reply, usage = await self.complete(messages, on_token)
        result = GeneratedCode(code="", generator="model", model=self.model)
        result.prompt_tokens, result.completion_tokens = usage
        code = extract_code(reply)
        used, problems = check_code(code, context.tools + context.skills)
        if problems:
            result.attempts = 2
            result.notes.append("repaired: " + " ".join(problems))
            if on_token is not None:
                on_token("\n# The first reply had problems; asking the model to repair it.\n")
            messages += [
                {"role": "assistant", "content": reply},
                {
                    "role": "user",
                    "content": "That code cannot run: "
                    + " ".join(problems)
                    + " Reply with corrected code in one ```python block, using only the tools given.",
                },
            ]
            reply, usage = await self.complete(messages, on_token)
            result.prompt_tokens += usage[0]
            result.completion_tokens += usage[1]
            code = extract_code(reply)
            used, problems = check_code(code, context.tools + context.skills)
            if problems:
                shown = reply if len(reply) <= _REPLY_SHOWN else reply[:_REPLY_SHOWN] + "…"
                raise GenerationError(
                    f"The model's code could not be used, even after a repair round: "
                    f"{' '.join(problems)}\nWhat the model said:\n{shown}"
                )
        result.code = code
        result.tools_used = used
        return result

    async def complete(
        self, messages: list[dict[str, str]], on_token: TokenCallback | None
    ) -> tuple[str, tuple[int, int]]:
        """The reply text and (prompt, completion) token counts."""
        import openai

        for _ in range(4):
            try:
                if on_token is None:
                    return await self._complete_once(messages)
                return await self._stream_once(messages, on_token)
            except openai.BadRequestError as exc:
                if not self._adjust(str(exc)):
                    raise GenerationError(
                        f"The model endpoint refused the request: {_message(exc)}"
                    ) from None
            except openai.APIError as exc:
                raise GenerationError(self._explain(exc)) from None
        raise GenerationError("The model endpoint kept refusing the request's parameters.")

    async def _complete_once(self, messages: list[dict[str, str]]) -> tuple[str, tuple[int, int]]:
        response = await self.client().chat.completions.create(
            model=self.model, messages=messages, **self._params
        )
        if not getattr(response, "choices", None):
            raise GenerationError(
                f"The model endpoint sent a reply without choices: {response!r:.300}"
            )
        text = response.choices[0].message.content or ""
        usage = response.usage
        if usage is None:
            return text, (_estimate(messages), len(text) // 4)
        return text, (usage.prompt_tokens or 0, usage.completion_tokens or 0)

    async def _stream_once(
        self, messages: list[dict[str, str]], on_token: TokenCallback
    ) -> tuple[str, tuple[int, int]]:
        extra: dict[str, Any] = (
            {"stream_options": {"include_usage": True}} if self._stream_usage else {}
        )
        stream = await self.client().chat.completions.create(
            model=self.model, messages=messages, stream=True, **self._params, **extra
        )
        parts: list[str] = []
        usage = None
        async for chunk in stream:
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
            for choice in chunk.choices or []:
                delta = choice.delta.content if choice.delta is not None else None
                if delta:
                    parts.append(delta)
                    on_token(delta)
        text = "".join(parts)
        if usage is None:
            return text, (_estimate(messages), len(text) // 4)
        return text, (usage.prompt_tokens or 0, usage.completion_tokens or 0)

    def _adjust(self, message: str) -> bool:
        """Change the parameter a 400 complains about; False when there is nothing to change."""
        text = message.lower()
        if (
            "max_tokens" in text
            and "max_tokens" in self._params
            and "max_completion_tokens" in text
        ):
            self._params["max_completion_tokens"] = self._params.pop("max_tokens")
            return True
        if "max_completion_tokens" in text and "max_completion_tokens" in self._params:
            self._params["max_tokens"] = self._params.pop("max_completion_tokens")
            return True
        if "temperature" in text and "temperature" in self._params:
            del self._params["temperature"]
            return True
        if "stream_options" in text and self._stream_usage:
            self._stream_usage = False
            return True
        return False

    def _explain(self, exc: Exception) -> str:
        import openai

        where = self.settings.endpoint
        if isinstance(exc, openai.AuthenticationError):
            return f"The model endpoint {where} rejected the API key (401). Check OPENAI_API_KEY."
        if isinstance(exc, openai.PermissionDeniedError):
            return f"The model endpoint {where} refused access (403): {_message(exc)}"
        if isinstance(exc, openai.NotFoundError):
            return f"The model endpoint {where} has no model {self.model!r} (404). Set model.name."
        if isinstance(exc, openai.RateLimitError):
            return (
                f"The model endpoint {where} is rate limiting (429) and still was after "
                f"{self.settings.max_retries} retries. Wait a moment and run the cell again."
            )
        if isinstance(exc, openai.APITimeoutError):
            return (
                f"The model endpoint {where} did not answer within {self.settings.timeout:g} s. "
                "Raise model.timeout or try again."
            )
        if isinstance(exc, openai.APIConnectionError):
            return f"Cannot reach the model endpoint {where}: {exc}. Is the server running?"
        if isinstance(exc, openai.APIStatusError):
            status = getattr(exc, "status_code", "?")
            return (
                f"The model endpoint {where} failed with HTTP {status} after "
                f"{self.settings.max_retries} retries: {_message(exc)}"
            )
        return f"The model endpoint {where} failed: {exc}"


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def _message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return re.sub(r"\s+", " ", str(exc))[:500]


def _estimate(messages: list[dict[str, str]]) -> int:
    """About four characters per token, for endpoints that report no usage."""
    return sum(len(m["content"]) for m in messages) // 4
