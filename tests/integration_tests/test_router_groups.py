"""The client reads a `litellm.Router`'s model groups through its current API
(`registry().names()`), not the deprecated `get_model_names`."""

from __future__ import annotations

import warnings

import litellm

from turnbon_graph._litellm.client import LiteLLMClient, router_groups


def test_the_groups_are_read_without_a_deprecation_warning() -> None:
    params = {"model": "openai/gpt-4o-mini", "api_key": "sk-k", "api_base": "http://127.0.0.1:9"}
    router = litellm.Router(
        model_list=[
            {"model_name": "gen", "litellm_params": params},
            {"model_name": "sel", "litellm_params": params},
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        client = LiteLLMClient(router=router)
        assert router_groups(router) == {"gen", "sel"}
    assert client._groups == {"gen", "sel"}
