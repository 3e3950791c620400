from dm_core.state.store import StateStore  # noqa: F401
