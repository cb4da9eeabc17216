"""Adapters that put the ledger behind other frameworks' memory interfaces (optional extras).

* :mod:`projections.adapters.openai_agents` - the OpenAI Agents SDK's ``Session``
  (``pip install -e '.[openai-agents]'`` from your chatledger clone);
* :mod:`projections.adapters.langchain` - LangChain's ``BaseChatMessageHistory``
  (``pip install -e '.[langchain]'`` from your chatledger clone);
* :mod:`projections.adapters.langgraph` - a LangGraph checkpointer, ``BaseCheckpointSaver``
  (``pip install -e '.[langgraph]'`` from your chatledger clone).

Nothing is imported here: each adapter imports its framework, which the core install lacks;
without it, importing the adapter raises :class:`ModuleNotFoundError` naming the extra and the
command that installs it.
"""
