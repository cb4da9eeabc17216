"""Adapters that put the ledger behind other frameworks' memory interfaces (optional extras).

* :mod:`projections.adapters.openai_agents` - the OpenAI Agents SDK's ``Session``
  (``pip install 'chatledger[openai-agents]'``);
* :mod:`projections.adapters.langchain` - LangChain's ``BaseChatMessageHistory``
  (``pip install 'chatledger[langchain]'``).

Nothing is imported here: each adapter imports its framework, which the core install lacks.
"""
