"""The ranker as a tool of a real Haystack Agent: the agent's OpenAIChatGenerator (on the
scripted server) calls ``rerank_documents``; the ranker's own generator ranks on the same
server; the tool's small schema is what the model is sent."""

from __future__ import annotations

import json

from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage
from haystack_integrations.components.rankers.permsc import PSCRanker, ranker_tool
from haystack_integrations.components.rankers.permsc.tool import TOOL_PARAMETERS

from permsc_integrations.testing import Reply, ScriptedOpenAIServer, oracle_responder


def agent_script(kit):
    """The agent's turns: a tool call, then a final answer; ranking prompts: the oracle."""
    oracle = oracle_responder(kit.relevance)
    arguments = {
        "query": kit.QUERY,
        "documents": [{"content": text, "id": f"d{k}"} for k, (text, _) in enumerate(kit.DOCS)],
        "top_k": 2,
    }
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "rerank_documents", "arguments": json.dumps(arguments)},
    }

    def respond(request):
        if "tools" not in request.body:
            return oracle(request)
        if any(m.get("role") == "tool" for m in request.messages):
            return "Goldfish eat flakes and pellets."
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls", "logprobs": None}
        return Reply("", fields={"choices": [choice]})

    return respond


async def test_an_agent_calls_the_ranker_as_a_tool(kit):
    with ScriptedOpenAIServer(agent_script(kit)) as server:
        ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=3)
        tool = ranker_tool(ranker)
        agent = Agent(chat_generator=kit.generator(server), tools=[tool])
        agent.warm_up()
        out = agent.run(messages=[ChatMessage.from_user(kit.QUERY)])
        agent_requests = [r for r in server.requests if "tools" in r.body]
        ranking_requests = [r for r in server.requests if "tools" not in r.body]
        async_out = await agent.run_async(messages=[ChatMessage.from_user(kit.QUERY)])
    (sent,) = agent_requests[0].body["tools"]
    assert sent["function"]["name"] == "rerank_documents"
    assert sent["function"]["parameters"] == TOOL_PARAMETERS  # the small schema, as given
    assert len(json.dumps(sent)) < 1200
    assert len(ranking_requests) == 3  # m = 3 ranking calls
    for result in (out, async_out):
        (tool_message,) = [m for m in result["messages"] if m.tool_call_result is not None]
        lines = tool_message.tool_call_result.result.splitlines()
        assert lines[0].startswith("1. [d2] (score 1.00) Goldfish eat flakes")
        assert lines[1].startswith("2. [d1] (score 0.80)") and len(lines) == 2
        assert result["last_message"].text == "Goldfish eat flakes and pellets."


def test_an_agent_with_the_tool_survives_yaml(kit, server):
    from haystack import Pipeline

    ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=3, top_k=2)
    pipe = Pipeline()
    pipe.add_component(
        "agent", Agent(chat_generator=kit.generator(server), tools=[ranker_tool(ranker)])
    )
    text = pipe.dumps()
    assert "sk-test" not in text
    (tool,) = Pipeline.loads(text).get_component("agent").tools  # the default, safe loading
    assert tool.name == "rerank_documents" and tool.parameters == TOOL_PARAMETERS
    answer = tool.invoke(query=kit.QUERY, documents=[{"content": t} for t, _ in kit.DOCS])
    assert answer["documents"][0].content == kit.oracle_texts(1)[0]
