"""The shipped `.pre-commit-hooks.yaml`: loads as pre-commit loads it, and its `files` regex
selects exactly the files that change what candle reads (check-jsonschema's
`tests/acceptance/test_hook_file_matches.py` is the model)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HOOKS_FILE = ROOT / ".pre-commit-hooks.yaml"
HOOK_ID = "portkit-lint"


def get_hook(hook_id: str = HOOK_ID) -> dict[str, Any]:
    hooks = yaml.safe_load(HOOKS_FILE.read_text())
    for hook in hooks:
        if hook["id"] == hook_id:
            return hook
    raise LookupError(f"no hook with id={hook_id} in {HOOKS_FILE}")


GOOD = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-00001-of-00004.safetensors",
    "consolidated.safetensors",
    "model.gguf",
    "Llama-3.1-8B-Instruct-Q4_K_M.gguf",
    "models/llama/config.json",
    "models/llama/generation_config.json",
    "models/llama/model-00004-of-00004.safetensors",
    "models/llama/model.safetensors.index.json",
    "a/b/c/d/ggml-model-f16.gguf",
    "path with spaces/config.json",
    "my_adapter_model.safetensors",
    ".hidden/config.json",
    # the tokenizer files: what a candle program tokenizes with, and what transformers adds
    "tokenizer.json",
    "models/llama/tokenizer.json",
    "tokenizer_config.json",
    "models/llama/tokenizer_config.json",
    "special_tokens_map.json",
    "models/qwen/chat_template.jinja",
)

BAD = (
    # other *config.json files in a model repo: neither candle nor the tokenizer reads them
    "adapter_config.json",
    "preprocessor_config.json",
    "myconfig.json",
    "my_tokenizer.json",
    "tokenizer.json.bak",
    "tokenizer_config.jsonc",
    "templates/chat_template.jinja2",
    "models/llama/my_generation_config.json",
    # near misses on the extension
    "config.json.bak",
    "config.jsonc",
    "config.yaml",
    "config.json/README.md",
    "model.safetensors.lock",
    "model.safetensors.index.json.tmp",
    "models/model.safetensors/notes.txt",
    "model.gguf.part",
    "model.ggufx",
    "models/x.gguf/README.md",
    # PEFT adapters: no config.json beside them, never loaded by candle's llama
    "adapter_model.safetensors",
    "lora/adapter_model.safetensors",
    # formats candle's llama does not load from a directory
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "README.md",
    "tokenizer.model",
)


def _pattern() -> re.Pattern[str]:
    return re.compile(get_hook()["files"])


@pytest.mark.parametrize("path", GOOD)
def test_hook_matches_known_good_paths(path: str) -> None:
    pat = _pattern()
    # pre-commit applies `files` with re.search; the anchors make it a full match too.
    assert pat.search(path), f"{pat.pattern!r} did not match {path!r} (expected match)"
    assert pat.fullmatch(path), f"{pat.pattern!r} does not fully match {path!r}"


@pytest.mark.parametrize("path", BAD)
def test_hook_does_not_match_known_bad_paths(path: str) -> None:
    pat = _pattern()
    assert not pat.search(path), f"{pat.pattern!r} matched {path!r} (expected no match)"


def test_files_regex_is_anchored() -> None:
    files = get_hook()["files"]
    assert files.startswith("^") and files.endswith("$"), files


def test_hook_definition() -> None:
    hook = get_hook()
    assert hook["entry"] == "portkit lint"
    assert hook["language"] == "python"
    assert hook["name"] and hook["description"]
    assert hook.get("pass_filenames", True) is True
    # One `portkit lint` process gets every changed file, so each model dir is linted once
    # (pre-commit otherwise splits the file list across parallel processes).
    assert hook.get("require_serial") is True


def test_entry_is_a_declared_console_script() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert get_hook()["entry"].split()[0] in scripts


def test_manifest_validates_with_pre_commit() -> None:
    """pre-commit's own manifest schema accepts the file (keys, language, regex)."""
    clientlib = pytest.importorskip("pre_commit.clientlib")
    manifest = clientlib.load_manifest(str(HOOKS_FILE))
    assert [h["id"] for h in manifest] == [HOOK_ID]


def test_docs_local_hook_uses_the_same_files_regex() -> None:
    """docs/pre-commit.md's `repo: local` example must not drift from the shipped hook."""
    text = (ROOT / "docs" / "pre-commit.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```yaml")[1:]]
    local = next(yaml.safe_load(b) for b in blocks if "repo: local" in b)
    (doc_hook,) = local["repos"][0]["hooks"]
    hook = get_hook()
    for key in ("id", "files", "require_serial"):
        assert doc_hook[key] == hook[key], key
