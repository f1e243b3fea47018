"""``shrinkgpu versions``: the minimal case run in environments that differ from the
user's in one package version each (``envs``: overlays built with uv from the user's pip
indexes, ``index``: what those indexes offer), judged by ``check``'s same-bug rule, the
releases between two ends bisected (``bisect``); ``run`` is the command."""

from shrinkgpu.versions.envs import Cache, default_cache_dir
from shrinkgpu.versions.run import Answer, Row, Verdict, VersionsConfig, VersionsError, version_table, versions

__all__ = ["Answer", "Cache", "Row", "Verdict", "VersionsConfig", "VersionsError", "default_cache_dir", "version_table",
           "versions"]
