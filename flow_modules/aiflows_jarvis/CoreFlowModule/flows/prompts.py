"""Prompt templates that fail loudly: a variable the template uses but the caller does not give raises.

A template is compiled once per process: aiflows' JinjaPrompt compiles it again at every render, which costs far
more than the render itself, and a controller round renders two.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Iterable, Set

import jinja2
from aiflows.prompt_template import JinjaPrompt
from jinja2 import meta

from ..errors import ConfigurationError

_ENVIRONMENT = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


@functools.lru_cache(maxsize=1024)
def compiled(template: str) -> jinja2.Template:
    """``template`` compiled with the strict environment, once per process (the configurations hold a few hundred
    distinct templates; the cache is bounded all the same)."""
    return _ENVIRONMENT.from_string(template)


def template_variables(template: str) -> Set[str]:
    """The variables a Jinja template refers to."""
    return set(meta.find_undeclared_variables(_ENVIRONMENT.parse(template)))


class StrictJinjaPrompt(JinjaPrompt):
    """``aiflows.prompt_template.JinjaPrompt`` rendered with ``StrictUndefined``.

    *Configuration*: ``template`` (str), ``input_variables`` (list: what the caller must give),
    ``partial_variables`` (dict: values fixed in advance).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.environment = _ENVIRONMENT

    @classmethod
    def from_prompt(cls, prompt: Any) -> "StrictJinjaPrompt":
        """A strict copy of a JinjaPrompt (or of a config dict for one)."""
        if isinstance(prompt, StrictJinjaPrompt):
            return prompt
        if isinstance(prompt, JinjaPrompt):
            return cls(
                template=prompt.template,
                input_variables=list(prompt.input_variables),
                partial_variables=dict(prompt.partial_variables),
            )
        if isinstance(prompt, dict):
            fields = {k: v for k, v in prompt.items() if k != "_target_"}
            return cls(**fields)
        raise ConfigurationError(f"A prompt template must be a JinjaPrompt or a dict with `template`, got {prompt!r}")

    def format(self, **kwargs) -> str:
        merged = {**self.partial_variables, **kwargs}
        try:
            template = (
                compiled(self.template)
                if self.environment is _ENVIRONMENT
                else self.environment.from_string(self.template)
            )
            return template.render(**merged)
        except jinja2.UndefinedError as error:
            raise ConfigurationError(
                f"prompt template uses an undefined variable ({error.message}); "
                f"given: {sorted(merged)}; template starts: {self.template[:80]!r}"
            ) from error

    def partial(self, **kwargs) -> "StrictJinjaPrompt":
        return StrictJinjaPrompt(
            template=self.template,
            input_variables=[v for v in self.input_variables if v not in kwargs],
            partial_variables={**self.partial_variables, **kwargs},
        )

    def render_from(self, data: Dict[str, Any], where: str = "") -> str:
        """Render with this prompt's ``input_variables`` taken from ``data``; a missing one names the flow."""
        missing = [v for v in self.input_variables if v not in data]
        if missing:
            raise ConfigurationError(
                f"{where + ': ' if where else ''}the prompt needs {missing} but the input has only {sorted(data)}"
            )
        return self.format(**{v: data[v] for v in self.input_variables})

    def undeclared(self, given: Iterable[str] = ()) -> Set[str]:
        """Variables the template uses that are neither input variables, partial variables nor in ``given``."""
        known = set(self.input_variables) | set(self.partial_variables) | set(given)
        return template_variables(self.template) - known
