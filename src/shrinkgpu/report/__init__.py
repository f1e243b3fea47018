"""What the user and the maintainer get: the reduced files and the report (``files``,
``document``, with ``versions``)."""

from shrinkgpu.report.document import render_report, reproduce_command, suggest_check, verbatim_error, where_it_ran
from shrinkgpu.report.files import (
    BESIDE_MAX_BYTES,
    OutputError,
    PartialWriter,
    place_needed_files,
    read_partial,
    tidy_layout,
    write_outputs,
)
from shrinkgpu.report.versions import CollectEnv, git_revision, versions_section, write_versions_section

__all__ = [
    "BESIDE_MAX_BYTES",
    "CollectEnv",
    "OutputError",
    "PartialWriter",
    "place_needed_files",
    "read_partial",
    "render_report",
    "reproduce_command",
    "suggest_check",
    "tidy_layout",
    "git_revision",
    "verbatim_error",
    "versions_section",
    "where_it_ran",
    "write_outputs",
    "write_versions_section",
]
