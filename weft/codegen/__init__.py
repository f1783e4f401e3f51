"""C code generation: body rendering, nests, the runner, the compiler driver and cache."""

from weft.codegen.cpu import cpu_features, lanes_for
from weft.codegen.driver import Artifact, CacheWarning, build, flags_for
from weft.codegen.runner import render_source

__all__ = ["Artifact", "CacheWarning", "build", "cpu_features", "flags_for", "lanes_for", "render_source"]
