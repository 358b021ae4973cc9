"""StreamBuild's macro worker: loads the project's macros/**/*.py and calls them on request.

Speaks one JSON object per line on stdin/stdout. Started by `stb` only when a project has
macro files; needs nothing but the Python standard library. The module
`streambuild.compiler.macros.models` is provided here, so user files may import
`PipelineNamingContext` (and `MacroContext`) without any package installed.
"""

import ast
import dataclasses
import enum
import hashlib
import inspect
import json
import sys
import traceback
import types

PROTOCOL_OUT = sys.stdout
sys.stdout = sys.stderr  # a macro's print() must not corrupt the protocol


class PipelineMode(str, enum.Enum):
    DIRECT = "direct"
    VIRTUAL = "virtual"


@dataclasses.dataclass(frozen=True)
class PipelineNamingContext:
    name: str
    source_name: "str | None"
    model_names: tuple
    relative_directory: str
    mode: PipelineMode


@dataclasses.dataclass(frozen=True)
class MacroContext:
    adapter_name: str
    dialect: str
    target_name: str
    database: str
    schema: "str | None"
    virtual_environments: bool
    variables: types.MappingProxyType


def install_shim():
    names = ["streambuild", "streambuild.compiler", "streambuild.compiler.macros", "streambuild.compiler.macros.models"]
    for name in names:
        sys.modules.setdefault(name, types.ModuleType(name))
    models = sys.modules["streambuild.compiler.macros.models"]
    models.PipelineNamingContext = PipelineNamingContext
    models.PipelineMode = PipelineMode
    models.MacroContext = MacroContext
    sys.modules["streambuild.compiler.macros"].models = models


MACROS = {}  # name -> (function, relative file, line)
FILES = {}  # absolute path -> relative path


def send(payload):
    PROTOCOL_OUT.write(json.dumps(payload) + "\n")
    PROTOCOL_OUT.flush()


def located_error(error, fallback_file=None, fallback_line=None):
    """The innermost traceback frame inside a macro file, else the given fallback."""
    file, line = fallback_file, fallback_line
    if isinstance(error, SyntaxError) and error.filename in FILES:
        file, line = FILES[error.filename], error.lineno
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename in FILES:
            file, line = FILES[frame.filename], frame.lineno
    return {"message": f"{type(error).__name__}: {error}", "file": file, "line": line}


def load(files):
    flags = __import__("__future__").annotations.compiler_flag
    for entry in files:
        path, relative = entry["path"], entry["relative"]
        FILES[path] = relative
        try:
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
            tree = ast.parse(source, filename=path)
            code = compile(source, path, "exec", flags=flags, dont_inherit=True)
            module_name = "streambuild_project_macros_" + hashlib.sha1(path.encode()).hexdigest()[:12]
            module = types.ModuleType(module_name)
            module.__file__ = path
            exec(code, module.__dict__)
        except Exception as error:  # noqa: BLE001 - reported to the user with its location
            return {"ok": False, "error": located_error(error, relative, 1)}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            function = module.__dict__.get(node.name)
            if not inspect.isfunction(function) or function.__module__ != module_name:
                continue
            if node.name in MACROS:
                first = MACROS[node.name][1]
                return {
                    "ok": False,
                    "error": {
                        "message": f"Macro name collision for '{node.name}' in '{first}' and '{relative}'",
                        "file": relative,
                        "line": node.lineno,
                        "collision": True,
                    },
                }
            MACROS[node.name] = (function, relative, node.lineno)
    described = []
    for name, (function, relative, line) in sorted(MACROS.items()):
        params = [
            {"name": p.name, "annotation": p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", None) if p.annotation is not inspect.Parameter.empty else None, "kind": p.kind.name}
            for p in inspect.signature(function).parameters.values()
        ]
        doc = (inspect.getdoc(function) or "").split("\n\n")[0].strip()
        described.append({"name": name, "file": relative, "line": line, "params": params, "doc": doc})
    return {"ok": True, "macros": described}


def call(name, args, kwargs, naming_context=None):
    function, relative, line = MACROS[name]
    if naming_context is not None:
        context = dict(naming_context)
        context["model_names"] = tuple(context["model_names"])
        context["mode"] = PipelineMode(context["mode"])
        args = [PipelineNamingContext(**context)]
    try:
        value = function(*args, **kwargs)
    except TypeError as error:
        frames = traceback.extract_tb(error.__traceback__)
        if len(frames) <= 1:
            return {"ok": False, "error": {"message": f"could not be called: {error}", "file": relative, "line": line}}
        return {"ok": False, "error": located_error(error, relative, line)}
    except Exception as error:  # noqa: BLE001 - reported to the user with its location
        return {"ok": False, "error": located_error(error, relative, line)}
    if isinstance(value, str):
        return {"ok": True, "type": "str", "value": value}
    try:
        json.dumps(value)
        shown = value
    except (TypeError, ValueError):
        shown = repr(value)
    return {"ok": True, "type": type(value).__name__, "value": shown}


def main():
    install_shim()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        op = request.get("op")
        if op == "load":
            send(load(request["files"]))
        elif op == "call":
            send(call(request["macro"], request.get("args", []), request.get("kwargs", {}), request.get("naming_context")))
        else:
            send({"ok": False, "error": {"message": f"unknown operation {op!r}"}})


if __name__ == "__main__":
    main()
