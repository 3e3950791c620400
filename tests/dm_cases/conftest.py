"""Fixtures the DM cases share (imported here so that pytest finds them for every module)."""

from .handle_error_lib import error_scene_factory  # noqa: F401 (a fixture)
from .shardddl_scene import scene_factory  # noqa: F401 (a fixture)
