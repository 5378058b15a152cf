"""EsoLang-Bench as a suite (synthenv.tasks.esolang), tested on a small file of our own in the benchmark's format
(synthenv ships none of its data)."""

from __future__ import annotations

import json
import sys

import pytest

import strict_bf
import synthenv
from synthenv import tasks
from synthenv.cli import main
from synthenv.dialect import ESOLANG
from synthenv.tasks import esolang
from synthenv.tasks.esolang import EsolangError

PROBLEMS = [
    {"id": "T01", "difficulty": "easy", "title": "Echo", "description": "Echo the line.",
     "input_output_examples": [{"input": "hi", "output": "hi"}, {"input": "", "output": ""},
                               {"input": "a b", "output": "a b\n"}]},
    {"id": "T02", "difficulty": "easy", "title": "Next letter", "description": "Each letter plus one.",
     "input_output_examples": [{"input": "ab", "output": "bc"}, {"input": "x", "output": "y"}]},
    {"id": "T03", "difficulty": "medium", "title": "Reverse", "description": "Reverse it.",
     "input_output_examples": [{"input": "abc", "output": "cba"}, {"input": "z", "output": "z"}]},
    {"id": "T04", "difficulty": "extra_hard", "title": "Hello", "description": "Print Hi.",
     "input_output_examples": [{"input": "", "output": "Hi"}]},
]


@pytest.fixture()
def bench(tmp_path):
    folder = tmp_path / "EsolangBench" / "esolang_bench" / "data"
    folder.mkdir(parents=True)
    path = folder / esolang.FILE_NAME
    path.write_text(json.dumps({"metadata": {"name": "a small file in EsoLang-Bench's format"}, "problems": PROBLEMS}))
    return path


def test_the_problems_are_text_tasks_in_esolang_bench_s_dialect(bench):
    problems = esolang.load(str(bench))
    assert [t.name for t in problems] == ["esolang-T01", "esolang-T02", "esolang-T03", "esolang-T04"]
    echo = problems[0]
    assert echo.text and echo.dialect == ESOLANG and echo.max_steps == esolang.MAX_STEPS
    assert echo.cases[2] == ((97, 32, 98), (97, 32, 98, 10)) and esolang.tier(echo) == "easy"
    assert synthenv.score([",[.,]"], echo).solved.item()  # the trailing newline is not judged


def test_specs_select_the_suite_a_tier_or_a_problem_from_a_file_or_a_folder(bench, tmp_path):
    whole = tasks.expand(f"esolang:{bench}")
    assert whole == [f"esolang:{bench}#T0{i}" for i in range(1, 5)]
    assert tasks.expand(f"esolang:{bench}#easy") == whole[:2]
    assert tasks.expand(f"esolang:{bench}#medium,extra_hard") == [whole[2], whole[3]]
    assert tasks.expand(f"esolang:{tmp_path / 'EsolangBench'}#T03") == [f"esolang:{tmp_path / 'EsolangBench'}#T03"]
    task = tasks.from_spec(whole[2])
    assert task.name == "esolang-T03" and synthenv.score([">,[>,]<[.<]"], task).solved.item()


@pytest.mark.parametrize(("spec", "words"), [
    ("esolang:", ["names no source"]),
    ("esolang:{missing}", ["does not exist", "esolang_benchmark.json"]),
    ("esolang:{folder}", ["holds no esolang_benchmark.json"]),
    ("esolang:{bench}#hardest", ["'hardest' is neither a tier", "easy, medium, hard, extra_hard"]),
])
def test_bad_specs_say_what_is_wrong_and_the_fix(bench, tmp_path, spec, words):
    spec = spec.format(missing=tmp_path / "nope.json", folder=tmp_path, bench=bench)
    with pytest.raises(EsolangError) as error:
        tasks.expand(spec)
    assert all(word in str(error.value) for word in words), str(error.value)


@pytest.mark.parametrize(("document", "words"), [
    ({"items": []}, ["no list of 'problems'"]),
    ({"problems": [{"difficulty": "easy", "input_output_examples": [{"input": "", "output": "x"}]}]}, ["has no id"]),
    ({"problems": [{"id": "A", "input_output_examples": [{"input": 3, "output": "x"}]}]}, ["no test cases of text"]),
    ({"problems": [{"id": "A", "tests": []}]}, ["no test cases"]),
])
def test_a_malformed_file_names_the_problem(tmp_path, document, words):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(document))
    with pytest.raises(EsolangError) as error:
        esolang.load(str(path))
    assert str(path) in str(error.value) and all(word in str(error.value) for word in words), str(error.value)


def test_the_hub_without_the_datasets_library_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if it were not installed
    esolang._load_hub.cache_clear()
    with pytest.raises(EsolangError, match=r'pip install "synthenv\[llm\]"'):
        esolang.load("hf")


def test_a_table_over_the_suite_reports_each_problem_and_its_solution_passes_an_independent_interpreter(
        bench, tmp_path, capsys):
    out = tmp_path / "table"
    assert main(["table", "--tasks", f"esolang:{bench}#easy", "--algos", "islands", "--seeds", "1", "--seconds", "20",
                 "--out", str(out)]) == 0
    cells = json.loads(out.with_suffix(".json").read_text())["cells"]
    assert {cell["task"] for cell in cells} == {f"esolang:{bench}#T01", f"esolang:{bench}#T02"}
    for cell in cells:
        task = tasks.from_spec(cell["task"])
        (result,) = cell["results"]
        assert result["solved"], cell["task"]
        assert strict_bf.passes(result["best_program"], task.cases, ignore_trailing_whitespace=True), result
