"""verify's tokenizer section and `portkit fix` on tokenizer.json, end to end, on every shape
(fixtures.tokenizer_shapes): the candle side is the tokenizers crate candle uses (portkit_native),
the other transformers' own tokenizer.

- a triggering shape differs (MISMATCH, exit 1) and each of its fixable findings is CONFIRMED
  from the ids; its clean twin (a transformers 5 save) agrees;
- the negative control: one id changed on candle's side is a MISMATCH;
- after `portkit fix --write` the ids are equal on the whole corpus, and every byte outside the
  edited values is kept;
- a file the crate refuses is CRASH-CONFIRMED with the crate's own message;
- `--text` / `--chat` run transformers' ids on both sides and show candle's own;
- the greedy reference stops on generation_config.json's eos ids.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from fixtures.seams import candle_tokens_perturbed
from fixtures.tokenizer_shapes import SHAPES, shape_dir, write_tokenizer
from portkit.cli import main as portkit_main
from portkit.verify.cli import main
from tests.unit.tokenizer_cases import _metaspace_file, _normalized_decoder_kept, _set, shape

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "verify-report.schema.json").read_text())
TOKENIZER_SCHEMA = json.loads((ROOT / "schemas" / "verify-tokenizer-report.schema.json").read_text())

#: the findings each triggering shape's verify confirms (the static ones are never confirmed)
CONFIRMED = {
    "llama2": {"PK501", "PK502", "PK505", "PK519"},
    "phi3": {"PK501", "PK502"},
    "mistral": {"PK501", "PK509"},
    "smollm": {"PK503", "PK506"},
    "llama3": {"PK509"},
    "qwen2": {"PK501"},
    "gemma": {"PK501", "PK504", "PK509"},
    "neox": {"PK511"},
}


@pytest.fixture(autouse=True)
def _reference_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")


def verify_json(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, dict]:
    code = main([str(a) for a in argv] + ["--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, json.loads(out)


@pytest.mark.parametrize("shape", SHAPES)
def test_trigger_differs_and_clean_agrees(shape: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trig = write_tokenizer(tmp_path / "t", shape, "trigger")
    code, doc = verify_json(capsys, trig)
    jsonschema.validate(doc, TOKENIZER_SCHEMA)
    sec = doc["tokenizer"]
    assert {f["code"] for f in sec["findings"] if f["verdict"] == "CONFIRMED"} == CONFIRMED[shape], sec["findings"]
    assert all(f["verdict"] == "NOT-PROBED" for f in sec["findings"] if f["code"] in ("PK508", "PK510"))
    # PK504 is judged on what its edit changes, the decoded texts (its probe's `measure`), not on encodes
    assert all("decoded texts differ" in f["evidence"] for f in sec["findings"] if f["code"] == "PK504"), sec[
        "findings"
    ]
    if shape == "llama3":
        # the same ids on both sides and BOS twice on both (PK509 confirmed): reported, not a
        # mismatch; MISMATCH means candle differs
        assert code == 0 and doc["verdict"] == "agree" and sec["differing"] == 0, sec
    else:
        assert code == 1 and doc["verdict"] == "mismatch" and doc["kind"] == "tokenizer"
        first = sec["first_difference"]
        assert sec["differing"] > 0 and first["candle"]["ids"] != first["transformers"]["ids"]
        assert first["candle"]["pieces"] and first["transformers"]["pieces"]
    clean = write_tokenizer(tmp_path / "c", shape, "clean")
    code, doc = verify_json(capsys, clean)
    jsonschema.validate(doc, TOKENIZER_SCHEMA)
    assert code == 0 and doc["tokenizer"]["differing"] == 0 and doc["tokenizer"]["encodes"] >= 30, doc["tokenizer"]
    assert doc["forward"].startswith("skipped")


def test_a_special_decoded_as_its_normalized_form_is_confirmed_by_decoding_skipping_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """PK519: candle 0.11.1's crate keeps `▁<s>` where transformers drops `<s>` when both decode skipping special
    tokens, and the edit removes every such difference; where transformers matches `<s>` normalized too, it
    decodes as the crate does (the same crate 0.23): no finding, and the texts agree."""
    trig = write_tokenizer(tmp_path / "t", "llama2", "trigger")
    code, doc = verify_json(capsys, trig)
    (f,) = [f for f in doc["tokenizer"]["findings"] if f["code"] == "PK519"]
    assert f["verdict"] == "CONFIRMED", f
    # PK505's edit is the same: measured on the file as written, with its edit alone
    assert re.search(r"\b[1-9]\d* of \d+ texts decoded skipping special tokens differ", f["evidence"]), f
    assert "with its edit alone (normalized_false) 0;" in f["evidence"], f
    kept, _ = shape("llama2", config=_normalized_decoder_kept)(tmp_path / "k")
    code, doc = verify_json(capsys, kept)
    assert "PK519" not in {f["code"] for f in doc["tokenizer"]["findings"]}


def test_text_on_a_tokenizer_only_directory_leads_the_corpus(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    d = write_tokenizer(tmp_path / "t", "phi3", "trigger")
    code, doc = verify_json(capsys, d, "--chat", "Hi!")
    first = doc["tokenizer"]["first_difference"]
    assert code == 1 and first["tags"] == ["--chat"] and first["text"].startswith("<|user|>\nHi!")
    # right after `<|user|>` (rstrip: it takes the newline) candle adds "▁", transformers does not
    c, t = first["candle"]["pieces"], first["transformers"]["pieces"]
    after = lambda pieces: pieces[next(i for i, p in enumerate(pieces) if p.startswith("<|user|>")) + 1]  # noqa: E731
    assert after(c).startswith("▁") and not after(t).startswith("▁"), (c, t)


def test_negative_control_one_id_changed_is_a_mismatch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "c", "llama3", "clean")
    code, doc = verify_json(capsys, d)
    assert code == 0
    with candle_tokens_perturbed():
        code, doc = verify_json(capsys, d)
    assert code == 1 and doc["verdict"] == "mismatch" and doc["tokenizer"]["differing"] == 1
    first = doc["tokenizer"]["first_difference"]
    assert (
        first["candle"]["ids"][0] == first["transformers"]["ids"][0] + 1
        and first["candle"]["ids"][1:] == first["transformers"]["ids"][1:]
    )


def _spans(text: str) -> tuple[str, str]:
    """The bytes of model.vocab and model.merges, which fix must never move."""
    from portkit.model.tokenizer_files import parse_tokenizer_json

    tj = parse_tokenizer_json(Path("tokenizer.json"), text)
    assert tj.vocab_span and tj.merges_span
    return text[slice(*tj.vocab_span)], text[slice(*tj.merges_span)]


@pytest.mark.parametrize("shape", SHAPES)
def test_fix_write_makes_the_crate_give_transformers_ids(
    shape: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    d = write_tokenizer(tmp_path / "m", shape, "trigger")
    before = (d / "tokenizer.json").read_text(encoding="utf-8")
    rc = portkit_main(["fix", "--write", str(d)])
    _, err = capsys.readouterr()
    after = (d / "tokenizer.json").read_text(encoding="utf-8")
    fixable = CONFIRMED[shape] - {"PK509"}
    if fixable:
        assert "portkit: fixed" in err and all(c in err for c in fixable), err
    # every other key kept, in its order; vocabulary and merges byte for byte
    old, new = json.loads(before), json.loads(after)
    assert list(old) == list(new) and list(old["model"]) == list(new["model"])
    assert _spans(before) == _spans(after)
    edited = {"normalizer", "pre_tokenizer", "decoder", "post_processor", "padding", "truncation", "added_tokens"}
    assert {k: v for k, v in old.items() if k not in edited} == {k: v for k, v in new.items() if k not in edited}
    code, doc = verify_json(capsys, d)
    assert doc["tokenizer"]["differing"] == 0, doc["tokenizer"]["first_difference"]
    # what remains is what no tokenizer.json edit fixes
    assert rc == (1 if shape in ("phi3", "mistral", "llama3", "qwen2", "gemma") else 0), err
    assert {f["code"] for f in doc["tokenizer"]["findings"]} <= {"PK508", "PK509", "PK510"}


#: the other differences the Gemma and GPT-NeoX mirrors name, each confirmed from the ids and fixed
REBUILT_VARIANTS = {
    # a Gemma vocabulary whose file has the Llama converter's `legacy: false` pipeline (a Metaspace)
    "gemma-metaspace": (
        lambda: shape("gemma", "clean", tokenizer=_metaspace_file, config=_set(tokenizer_class="GemmaTokenizer")),
        {"PK501", "PK503"},
    ),
    "neox-without-nfc": (
        lambda: shape(
            "neox", "clean", tokenizer=_set(normalizer=None), config=_set(tokenizer_class="GPTNeoXTokenizer")
        ),
        {"PK501"},
    ),
    "neox-add-prefix-space": (lambda: shape("neox", config=_set(add_prefix_space=True)), {"PK503", "PK511"}),
}


@pytest.mark.parametrize("name", sorted(REBUILT_VARIANTS))
def test_gemma_and_neox_differences_are_confirmed_and_fixed(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    build, confirmed = REBUILT_VARIANTS[name]
    d, _ = build()(tmp_path / "m")
    code, doc = verify_json(capsys, d)
    sec = doc["tokenizer"]
    assert code == 1 and sec["differing"] > 0
    assert {f["code"]: f["verdict"] for f in sec["findings"]} == dict.fromkeys(confirmed, "CONFIRMED"), sec["findings"]
    assert portkit_main(["fix", "--write", str(d)]) == 0
    capsys.readouterr()
    code, doc = verify_json(capsys, d)
    assert code == 0 and doc["tokenizer"]["differing"] == 0 and doc["tokenizer"]["findings"] == []


def test_fix_diff_is_what_write_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    d = write_tokenizer(tmp_path / "m", "llama2", "trigger")
    shutil.copytree(d, tmp_path / "w")
    monkeypatch.chdir(tmp_path)
    assert portkit_main(["fix", "m"]) == 1
    diff, _ = capsys.readouterr()
    assert '-  "normalizer": {' in diff and '+  "normalizer": null,' in diff and '+      "normalized": false,' in diff
    assert diff.startswith("--- a/m/tokenizer.json\n+++ b/m/tokenizer.json\n")
    (tmp_path / "p.diff").write_text(diff)
    subprocess.run(["patch", "-p1", "-s", "-i", "p.diff"], check=True, cwd=tmp_path)
    portkit_main(["fix", "--write", "w"])
    capsys.readouterr()
    assert (d / "tokenizer.json").read_text() == (tmp_path / "w" / "tokenizer.json").read_text()


def test_a_file_the_crate_refuses_is_crash_confirmed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "t", "llama2", "trigger")
    doc = json.loads((d / "tokenizer.json").read_text())
    doc["model"]["merges"].insert(3, "   ")
    (d / "tokenizer.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    code, out = verify_json(capsys, d)
    sec = out["tokenizer"]
    assert code == 1 and sec["candle_error"].startswith("Merges text file invalid at line 4 at line ")
    (pk507,) = [f for f in sec["findings"] if f["code"] == "PK507"]
    assert pk507["verdict"] == "CRASH-CONFIRMED" and sec["candle_error"] in pk507["evidence"]
    # no edit portkit can make: fix lists it with the reason, writes nothing, exit 1
    rc = portkit_main(["fix", "--write", str(d)])
    _, err = capsys.readouterr()
    assert rc == 1 and "PK507" in err and "regenerate it with the `tokenizers` library" in err


def _model_copy(shape: str, variant: str, tmp: Path) -> Path:
    d = tmp / f"{shape}-{variant}"
    shutil.copytree(shape_dir(shape, variant, with_model=True), d)
    return d


def test_verify_with_weights_runs_the_tokens_first_and_the_forward(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    d = _model_copy("phi3", "trigger", tmp_path)
    code, doc = verify_json(capsys, d, "--tokens", "3", "--no-layers", "--chat", "Hi!")
    jsonschema.validate(doc, SCHEMA)
    assert code == 1 and doc["verdict"] == "mismatch"
    assert doc["tokenizer"]["differing"] > 0 and doc["comparison"]["ok"]  # the forward on transformers' ids agrees
    p = doc["prompt"]
    assert p["source"] == "--chat" and p["text"].startswith("<|user|>\nHi!<|end|>\n<|assistant|>")
    assert p["candle_ids"] != p["ids"]  # `▁Hi` in candle, `Hi` in transformers
    assert {f["code"] for f in doc["findings"]}.isdisjoint({"PK501", "PK502"})  # judged in the tokenizer section
    code = main([str(d), "--tokens", "3", "--no-layers", "--text", " Hello world"])
    out, _ = capsys.readouterr()
    assert "candle's own ids for this text differ" in out and out.index("tokens: candle vs transformers") < out.index(
        "candle vs transformers\n"
    )
    # the model's findings header counts the tokenizer findings judged above, not "0 ... none" alone
    assert re.search(
        r"findings \(portkit lint: \d+; [1-9]\d* tokenizer findings judged in the tokens section above\)", out
    ), out
    clean = _model_copy("phi3", "clean", tmp_path)
    code, doc = verify_json(capsys, clean, "--tokens", "3", "--no-layers", "--chat", "Hi!")
    jsonschema.validate(doc, SCHEMA)
    assert code == 0 and doc["tokenizer"]["ok"]
    # `apply_chat_template` adds no special tokens; a candle program encoding the rendered text
    # with `encode(text, true)` gets the post-processor's BOS in front
    assert doc["prompt"]["candle_ids"] == [1, *doc["prompt"]["ids"]]
    code, doc = verify_json(capsys, clean, "--tokens", "3", "--no-layers", "--text", " Hello world")
    assert code == 0 and doc["prompt"]["candle_ids"] == doc["prompt"]["ids"]


def test_greedy_reference_stops_on_generation_configs_eos(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = _model_copy("llama3", "clean", tmp_path)
    code, doc = verify_json(capsys, d, "--tokens", "6", "--no-layers", "--ids", "474,300,301,302,303,304,305,306")
    greedy = doc["comparison"]["greedy"]["reference"]
    assert doc["greedy_stop"]["stopped_at"] is None and len(greedy) == 6
    gen = json.loads((d / "generation_config.json").read_text())
    gen["eos_token_id"] = [9999, greedy[2]]  # as if the model ended its answer there
    (d / "generation_config.json").write_text(json.dumps(gen))
    code, doc = verify_json(
        capsys, d, "--tokens", "6", "--no-layers", "--ids", "474,300,301,302,303,304,305,306", "--no-cache"
    )
    jsonschema.validate(doc, SCHEMA)
    k = greedy.index(greedy[2])
    assert doc["greedy_stop"] == {
        "eos_token_ids": [9999, greedy[2]],
        "source": "generation_config.json",
        "stopped_at": k,
        "token": greedy[2],
    }
    assert doc["comparison"]["greedy"]["reference"] == greedy[: k + 1] and doc["comparison"]["greedy"]["ok"]


def test_fix_in_the_hf_cache_never_writes_a_blob(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from fixtures import hf_cache as hc

    cache = tmp_path / "hub"
    src = write_tokenizer(tmp_path / "src", "smollm", "trigger")
    hc.add_revision(cache, "acme/tok", {p.name: p.read_bytes() for p in src.iterdir()})
    blobs = {p: p.read_bytes() for p in sorted(cache.glob("*/blobs/*"))}
    r = hc.repo_dir(cache, "acme/tok")
    snap = r / "snapshots" / (r / "refs" / "main").read_text()
    assert (snap / "tokenizer.json").is_symlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HUB_CACHE=str(cache), NO_COLOR="1", PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "portkit", "fix", "--write", "acme/tok"],
        env=env,
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert "fixed 2 findings (PK503, PK506)" in p.stderr and "its tokenizer.json is now a file of its own" in p.stderr
    assert {
        q: q.read_bytes() for q in sorted(cache.glob("*/blobs/*"))
    } == blobs  # no blob written, none added or removed
    assert (
        not (snap / "tokenizer.json").is_symlink()
        and json.loads((snap / "tokenizer.json").read_text())["padding"] is None
    )
    assert (snap / "tokenizer_config.json").is_symlink()


def test_the_measured_table_in_the_docs_is_current() -> None:
    from fixtures.doc_tables import assert_current
    from fixtures.tokenizer_table import END, START, block

    doc = (ROOT / "docs" / "tokenizers.md").read_text(encoding="utf-8")
    assert_current(doc, block(), START, END, "run `python -m fixtures.tokenizer_table --write docs/tokenizers.md`")


def test_saved_truncation_is_confirmed_by_the_one_text_longer_than_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A saved truncation changes only texts longer than its `max_length`: the corpus carries one
    such text, which alone differs, and PK506 is confirmed by its ids (its edit makes it agree)."""
    d = write_tokenizer(tmp_path / "t", "smollm", "clean")
    p = d / "tokenizer.json"
    doc = json.loads(p.read_text(encoding="utf-8"))
    doc["truncation"] = {"direction": "Right", "max_length": 48, "strategy": "LongestFirst", "stride": 0}
    p.write_text(json.dumps(doc), encoding="utf-8")
    code, out = verify_json(capsys, d)
    sec = out["tokenizer"]
    (pk506,) = [f for f in sec["findings"] if f["code"] == "PK506"]
    assert pk506["verdict"] == "CONFIRMED", pk506
    # only the texts longer than 48 tokens differ (the long one and, byte-level, the CJK one),
    # with and without special tokens; the edit removes every difference
    assert pk506["details"]["before"] == sec["differing"] == 4 and pk506["details"]["after"] == 0, pk506
    assert len(sec["first_difference"]["candle"]["ids"]) == 48 < len(sec["first_difference"]["transformers"]["ids"])
    assert code == 1 and out["verdict"] == "mismatch"
    # no prompt is planned in a tokenizer-only verify, so the truncation is a warning
    assert pk506["severity"] == "warning" and pk506["message"].endswith(
        "no prompt length is planned (`--max-prompt-tokens`)"
    )
