"""What a new user meets in the first hour (issue 26), through the real openai client and a
real loopback server: typos in backend options, repeated failures, masked secrets."""

from __future__ import annotations

import pytest

from permsc_integrations import PSCRanker
from permsc_integrations.backends import resolve_backend
from permsc_integrations.errors import ConfigurationError

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(60)

ITEMS = ["gold gold", "tin", "gold", "iron"]


def test_a_typo_in_backend_options_is_refused_when_the_ranker_is_built(scripted_server) -> None:
    server = scripted_server()
    with pytest.raises(ConfigurationError) as caught:
        PSCRanker("openai:m", backend_options={"base_ulr": server.base_url})
    assert "'base_ulr' for the openai backend (did you mean 'base_url'?)" in str(caught.value)
    with pytest.raises(ConfigurationError, match="did you mean 'device'"):
        resolve_backend("embedded", devcie="cpu")
    assert server.request_count == 0
