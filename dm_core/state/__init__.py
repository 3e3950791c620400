from dm_core.state.store import Position, StateStore  # noqa: F401
