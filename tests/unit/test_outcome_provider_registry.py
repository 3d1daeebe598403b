"""The outcome provider registry (app/outcomes/providers/): every `Provider` has one module whose provider object
keeps the `OutcomeProvider` protocol, and nothing outside those modules chooses by provider. A half-added provider
(an enum member without its registry line, a module missing a method or taking other arguments) fails here."""

import ast
import inspect
from pathlib import Path

import pytest

from app.outcomes.providers import PROVIDERS, Provider
from app.outcomes.providers.base import InboundShape, OutcomeProvider
from app.outcomes.sources import OutcomeSourceCreate

APP = Path(__file__).resolve().parents[2] / "app"


def _members(protocol: type) -> dict[str, object]:
    """The protocol's methods and properties, as declared."""
    return {name: value for name, value in vars(protocol).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, property))}


def _parameters(function) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values() if p.name != "self"]


def protocol_problems(thing: object, protocol: type) -> list[str]:
    """What `thing` lacks of `protocol`: a member, or a method's parameters (names and kinds) as declared."""
    problems = []
    for name, declared in _members(protocol).items():
        if not hasattr(thing, name):
            problems.append(f"no {name}")
        elif callable(declared) and _parameters(getattr(thing, name)) != _parameters(declared):
            problems.append(f"{name} takes {_parameters(getattr(thing, name))}, not {_parameters(declared)}")
    return problems


def test_every_provider_has_exactly_one_registry_entry():
    assert set(PROVIDERS) == set(Provider)


@pytest.mark.parametrize("provider", list(Provider))
def test_each_provider_is_its_own_module_and_keeps_the_protocol(provider):
    implementation = PROVIDERS[provider]
    assert type(implementation).__module__ == f"app.outcomes.providers.{provider.value}"
    assert isinstance(implementation, OutcomeProvider)
    assert protocol_problems(implementation, OutcomeProvider) == []
    assert implementation.title
    assert implementation.credential is None or implementation.credential in OutcomeSourceCreate.CREDENTIALS
    assert set(OutcomeSourceCreate.CREDENTIALS) <= set(OutcomeSourceCreate.model_fields)
    if implementation.inbound is not None:
        assert protocol_problems(implementation.inbound, InboundShape) == []
        assert implementation.inbound.media in ("json", "form") and implementation.inbound.mark


def test_a_half_made_provider_is_caught():
    class HalfMade:  # no parse, no inbound; verify takes other arguments
        title, credential = "Half", None

        def credentials(self, source_id, given):
            return given, None

        def verify(self, headers, body):
            return None

        def verify_inbound(self, headers, *, material, source_id):
            return None

    assert not isinstance(HalfMade(), OutcomeProvider)
    problems = protocol_problems(HalfMade(), OutcomeProvider)
    assert "no parse" in problems and "no inbound" in problems
    assert any(problem.startswith("verify takes") for problem in problems)


def test_no_module_outside_the_providers_chooses_by_provider():
    """`Provider.X` is named only in the registry (and its modules): elsewhere the registry is asked."""
    named = []
    for path in APP.rglob("*.py"):
        if path.parent == APP / "outcomes" / "providers":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Provider":
                named.append(f"{path.relative_to(APP.parent)}:{node.lineno}")
    assert named == []
