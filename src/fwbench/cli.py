"""Command line: run one cell by hand exactly as the workflow does, and the small steps around it."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from fwbench.running.devices import DeviceCheckError
from fwbench.study.config import ConfigError, validate_config
from fwbench.study.files import DEFAULT_STUDY, load_config, resolve, show
from fwbench.study.params import measurement_settings
from fwbench.workflow.archive import ArchiveError


def _cell_config(config: dict, args: argparse.Namespace) -> dict:
    """The config restricted to one cell, re-validated so a bad --model etc. gets the config's one-line error."""
    narrowed = {k: v for k, v in config.items()}
    narrowed.update(frameworks=[args.framework], models=[args.model], precisions=[args.precision])
    # One mode: --mode (validated by the schema like the config's own, so an unknown one is a one-line error), or
    # the framework's first in the config.
    first = (config.get("modes") or {}).get(args.framework) or [None]
    mode = args.mode or first[0]
    if mode:
        narrowed["modes"] = {**config.get("modes", {}), args.framework: [mode]}
    narrowed["mode_scope"] = {}
    narrowed[args.suite] = {**config[args.suite], "batch_sizes": [args.batch_size]}
    if args.suite == "training":  # the cell asked for is trained, whichever models the study trains
        narrowed["training"]["models"] = None
    narrowed["suites"] = [args.suite]
    return validate_config(narrowed)


def _device_record(config: dict, results: Path) -> dict:
    """The study's device record (RESULTS/device.json), checked now as the workflow's device_check rule does if
    there is none yet, so a cell run by hand is held to the same device as the workflow's cells."""
    from fwbench.running.devices import check, read_record

    path = results / "device.json"
    if path.exists():
        return read_record(path)
    print(f"fwbench: no device record at {path}; checking what the frameworks see", file=sys.stderr)
    return check(config["frameworks"], config["device"], 1, path)


def cmd_check_device(args: argparse.Namespace) -> int:
    from fwbench.running.devices import check

    config = load_config(args.config)
    record = check(config["frameworks"], config["device"], args.gpus, Path(args.results, "device.json"))
    gpus = ", ".join(f"{g['index']}: {g['name']} ({g['uuid'] or 'no UUID'})" for g in record["gpus"]) or "none"
    print(f"device {record['platform']} for {', '.join(config['frameworks'])} (GPUs: {gpus})")
    return 0


def cmd_run_cell(args: argparse.Namespace) -> int:
    from fwbench.data.prepare import check_matches, prepare
    from fwbench.data.store import MANIFEST, read_manifest
    from fwbench.models.weights import init_weights
    from fwbench.running.runner import run_cell
    from fwbench.study.grid import cells

    study = load_config(args.config)
    config = _cell_config(study, args)
    (cell,) = [c for c in cells(config) if c.suite == args.suite]
    record = _device_record(study, Path(args.results))
    data_dir, weights = Path(args.data_dir), Path(args.weights or Path(args.results, "weights", f"{cell.model}.npz"))
    if not (data_dir / MANIFEST).exists():
        print(f"fwbench: no dataset at {data_dir}; preparing it from {args.config}", file=sys.stderr)
        prepare(config["dataset"], data_dir)
    check_matches(read_manifest(data_dir), config["dataset"], data_dir)
    if not weights.exists():
        print(f"fwbench: no weights at {weights}; initialising them (seed {config['seed']})", file=sys.stderr)
        init_weights(
            cell.model,
            num_classes=config["dataset"]["num_classes"],
            image_size=cell.image_size,
            seed=config["seed"],
            out=weights,
            pretrained=config["pretrained"].get(cell.model),
            head_init=config["head_init"],
        )
    settings = measurement_settings(config, cell.suite)  # as the workflow's rules pass them
    result = run_cell(
        cell,
        settings,
        data_dir=data_dir,
        weights_path=weights,
        num_classes=config["dataset"]["num_classes"],
        threads=args.threads,
        out_path=args.out,
        log_path=args.log,
        state_dir=Path(args.results, "state", cell.relpath()).with_suffix("") if cell.suite == "training" else None,
        device_record=record,
        slot_dir=Path(args.results, "slots"),
        fallbacks=study["fallbacks"],
    )
    if result["status"] == "ok" and cell.suite == "training":
        m, last = result["metrics"], result["metrics"]["epochs"][-1]
        resumed = f", resumed from epoch {m['resumed_from_epoch']}" if m["resumed_from_epoch"] is not None else ""
        print(
            f"{cell.label()}: {len(m['epochs'])} epochs, {last['img_s']:.1f} img/s, top-1 {last['top1']:.3f}, "
            f"step-0 loss {m['step0']['loss']:.4f}{resumed} -> {args.out}"
        )
    elif result["status"] == "ok":
        m = result["metrics"]
        print(
            f"{cell.label()}: {m['throughput_img_s']:.1f} img/s, p50 {m['latency_ms']['p50']:.3f} ms "
            f"({m['n_iters']} iterations) -> {args.out}"
        )
    else:
        print(f"{cell.label()}: FAILED, {result['failure']['kind']} ({result['reason']}) -> {args.out}")
    for deviation in result["deviations"]:
        print(f"{cell.label()}: ran with workaround {deviation['name']} ({deviation['applied_because']})")
    return 0


def cmd_failures(args: argparse.Namespace) -> int:
    """Failed cells and cells that ran with a workaround, and the command that reruns the failed ones (after a
    rung was added to the fallback ladder, say: the ladder is not a param, so Snakemake does not rerun them)."""
    from fwbench.results import load_result

    failed = []
    for path in sorted(Path(args.results, "cells").rglob("*.json")):
        try:
            result = load_result(path)
        except (OSError, ValueError) as exc:
            print(f"{path}: not a valid cell result ({type(exc).__name__}: {exc})")
            failed.append(path)
            continue
        if result["status"] != "ok":
            print(f"{path}: {result['failure']['kind']}: {result['reason']}")
            failed.append(path)
        for deviation in result["deviations"]:
            print(f"{path}: ok with workaround {deviation['name']} ({deviation['applied_because']})")
    if failed:
        print(
            "rerun the failed cells with:\n  snakemake --cores all --resources gpu=1 --forcerun "
            + " ".join(map(str, failed))
        )
    else:
        print(f"no failed cell under {args.results}/cells")
    return 0


def cmd_prepare_data(args: argparse.Namespace) -> int:
    from fwbench.data.prepare import prepare

    manifest = prepare(load_config(args.config)["dataset"], args.out, resources=args.resources, workers=args.workers)
    counts = ", ".join(f"{split} {entry['count']}" for split, entry in manifest["splits"].items())
    skipped = sum(manifest["skipped_count"].values())
    rate = manifest["timing"]["images_per_s"]
    print(f"dataset ({manifest['source']}, {counts}, {skipped} skipped, {rate:.0f} img/s) -> {args.out}")
    return 0


def cmd_init_weights(args: argparse.Namespace) -> int:
    from fwbench.models.weights import init_weights

    config = load_config(args.config)
    init_weights(
        args.model,
        num_classes=config["dataset"]["num_classes"],
        image_size=config["dataset"]["image_size"],
        seed=config["seed"],
        out=args.out,
        pretrained=config["pretrained"].get(args.model),
        head_init=config["head_init"],
    )
    return 0


def cmd_check_config(args: argparse.Namespace) -> int:
    from collections import Counter

    from snakemake.cli import parse_config  # the very parser of snakemake's --config, so both read values alike

    from fwbench.study.grid import cells, measuring_processes

    study = resolve(args.config, parse_config(args.set))
    grid = cells(study.config)
    per_suite = Counter(cell.suite for cell in grid)
    processes = measuring_processes(study.config)
    counts = ", ".join(f"{suite} {per_suite[suite]}" for suite in study.config["suites"])
    print(
        f"{' + '.join(layer.label for layer in study.layers)}: valid, {len(grid)} cells ({counts}), "
        f"{sum(processes.values())} measuring processes ({', '.join(f'{s} {n}' for s, n in processes.items())})"
    )
    for note in study.notes:
        print(f"note: {note}")
    if args.show:
        print(show(study))
    else:
        for cell in grid:
            print(f"  {cell.path(args.results)}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Run B's ratios against run A's (fwbench.analysis.compare.ratios, printed and written by compare_report): exit 1
    under --fail-on-change when any changed or flipped, so CI can stop on a regression; a directory or file that
    cannot be compared exits 2 (main)."""
    from fwbench.analysis.compare.ratios import compare_runs
    from fwbench.analysis.compare.report import render, write_outputs

    with tempfile.TemporaryDirectory(prefix="fwbench-compare-") as tmp:
        run_a, run_b = (_results_of(path, Path(tmp, side)) for path, side in ((args.run_a, "a"), (args.run_b, "b")))
        comparison = compare_runs(run_a, run_b, tolerance=args.tolerance)
        comparison.run_a, comparison.run_b = args.run_a, args.run_b  # named as given, not by the scratch folders
        print(render(comparison), end="")
        if args.out:
            written = write_outputs(comparison, args.out)
            print(f"-> {', '.join(map(str, written))}")
    return 1 if args.fail_on_change and comparison.has_change else 0


def _results_of(path: str, scratch: Path) -> str:
    """A results directory as given, or an archive (fwbench archive) extracted for reading into `scratch`."""
    if not Path(path).is_file():
        return path
    from fwbench.workflow.restore import extract_results

    return str(extract_results(path, scratch))


def cmd_doctor(args: argparse.Namespace) -> int:
    """What this environment can run (fwbench.workflow.doctor); always exit 0: it reports, it does not judge."""
    from fwbench.workflow import doctor

    environment = doctor.inspect(probe_devices=True if args.probe else None)
    print("\n".join(doctor.report_lines(environment, doctor.studies(Path(args.studies)))))
    return 0


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.1f} MB" if n_bytes >= 1e5 else f"{n_bytes / 1e3:.0f} kB"


def cmd_archive(args: argparse.Namespace) -> int:
    from snakemake.cli import parse_config

    from fwbench.workflow.archive import write_archive

    manifest = write_archive(args.study_dir, args.out, args.config, parse_config(args.set))
    files = manifest["files"]
    cells = sum(1 for name in files if name.startswith("results/cells/"))
    raw = sum(entry["size"] for entry in files.values())
    print(
        f"{args.out}: {_size(Path(args.out).stat().st_size)} ({len(files)} files, {_size(raw)} uncompressed, "
        f"{cells} cells) of {' + '.join(manifest['study']['configfiles'])}, measured on "
        f"{manifest['machine']['summary']}, code at {(manifest['code']['commit'] or 'no commit')[:12]}"
    )
    for pattern, why in manifest["left_out"].items():
        print(f"  left out {pattern}: {why}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from snakemake.cli import parse_config

    from fwbench.workflow.restore import ARCHIVED_STUDY, restore

    overrides = parse_config(args.set) if args.set else None
    record = restore(args.archive, args.into, args.config, overrides, report_only=args.report_only)
    manifest = record["manifest"]
    if args.report_only and not args.config:
        configfiles = [ARCHIVED_STUDY]
    else:
        configfiles = args.config or manifest["study"]["configfiles"]
    # one --configfile with every file: Snakemake keeps only the last of repeated ones
    command = "snakemake --cores all --resources gpu=1 --configfile " + " ".join(configfiles)
    what = "the measured files" if args.report_only else f"{record['files']} files"
    print(
        f"restored {what} of {' + '.join(manifest['study']['configfiles'])} into {Path(args.into, 'results')}, "
        f"measured on {manifest['machine']['summary']} (archived {manifest['created']}); build the tables, figures "
        "and paper with:\n"
        f"  {command}"
    )
    report_only = record["report_only"]
    if report_only:
        print(
            f"  {record['files']} measured files restored; {report_only['left_out']} files the report rules wrote are "
            "left out and written again by this checkout's code"
        )
        for difference in report_only["differences"]:
            print(f"  differs: {difference}")
    return 0


def _study_options(parser: argparse.ArgumentParser, files_help: str) -> None:
    """The study a command reads, as `snakemake --configfile FILE ... --config KEY=VALUE ...` names it."""
    parser.add_argument("--config", action="append", default=None, metavar="FILE", help=files_help)
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="a value as snakemake's --config gives it")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fwbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run-cell", help="measure one benchmark cell in a supervised child process")
    run.add_argument("--suite", required=True, choices=["inference", "training"])
    run.add_argument("--framework", required=True)
    run.add_argument("--model", required=True)
    run.add_argument("--precision", required=True)
    run.add_argument("--mode", default=None, help="execution mode (default: the framework's first in the config)")
    run.add_argument("--batch-size", required=True, type=int)
    run.add_argument("--config", required=True, help="study config YAML")
    run.add_argument("--out", required=True, help="result JSON path")
    run.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 0)) or os.cpu_count())
    run.add_argument("--results", default="results", help="results directory (for default data/weights paths)")
    run.add_argument("--data-dir", default=None, help="dataset directory (default: RESULTS/data)")
    run.add_argument("--weights", default=None, help="weights .npz (default: RESULTS/weights/MODEL.npz)")
    run.add_argument("--log", default=None, help="where to keep the child's output")
    run.set_defaults(func=cmd_run_cell)

    prep = sub.add_parser(
        "prepare-data", help="preprocess the config's dataset into DIR (shards + manifest.json), as the workflow does"
    )
    prep.add_argument("--config", required=True)
    prep.add_argument("--out", required=True)
    prep.add_argument("--workers", type=int, default=os.cpu_count(), help="decoding processes (default: all CPUs)")
    prep.add_argument("--resources", default="resources", help="where a Hub dataset is cached")
    prep.set_defaults(func=cmd_prepare_data)

    weights = sub.add_parser("init-weights", help="write the shared initial weights of one model")
    weights.add_argument("--config", required=True)
    weights.add_argument("--model", required=True)
    weights.add_argument("--out", required=True)
    weights.set_defaults(func=cmd_init_weights)

    device = sub.add_parser(
        "check-device", help="ask every framework what it computes on, as the workflow's device_check rule does"
    )
    device.add_argument("--config", required=True)
    device.add_argument("--results", default="results", help="where device.json is written")
    device.add_argument("--gpus", type=int, default=1, help="cells to run at once (the --resources gpu=N to check)")
    device.set_defaults(func=cmd_check_device)

    failures = sub.add_parser("failures", help="list failed cells and workarounds, and how to rerun the failed ones")
    failures.add_argument("--results", default="results")
    failures.set_defaults(func=cmd_failures)

    compare = sub.add_parser(
        "compare",
        help="compare two results directories ratio by ratio, and what differs in their environment",
        description="Every ratio of RUN_B's tables (speedups, mode gains, micro speedups) against RUN_A's: the "
        "change B/A with its 95% interval and a verdict (same, changed, flipped), the ratios in one run only, and "
        "what differs in hardware, software, environment variables and configuration (docs/compare.md). Exit "
        "status: 0, or 1 under --fail-on-change when a ratio changed or flipped; 2 when a run cannot be read.",
    )
    compare.add_argument(
        "run_a", metavar="RUN_A", help="the results directory compared against (e.g. results/), or an archive of one"
    )
    compare.add_argument("run_b", metavar="RUN_B", help="the results directory compared with it, or an archive")
    compare.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="a change within +-this fraction is `same` even when resolved (default 0.05: +-5%%)",
    )
    compare.add_argument(
        "--fail-on-change", action="store_true", help="exit 1 when any ratio changed or flipped (for CI)"
    )
    compare.add_argument("--out", default=None, metavar="DIR", help="write compare.csv, compare.json and the plot")
    compare.set_defaults(func=cmd_compare)

    check = sub.add_parser(
        "check-config",
        help="validate a study as `snakemake --configfile FILE` resolves it and list its cells",
        description="The study Snakemake runs with the same --configfile files (in the same order) and --config "
        f"values: without --config, {DEFAULT_STUDY}. A study file stands alone (the schema's defaults plus what it "
        "writes) unless it names a base with `extends:`.",
    )
    check.add_argument(
        "--config",
        action="append",
        default=None,
        metavar="FILE",
        help=f"study file, repeatable (default: {DEFAULT_STUDY})",
    )
    check.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a value as snakemake's --config KEY=VALUE gives it (parsed by snakemake's own parser), repeatable",
    )
    check.add_argument("--show", action="store_true", help="print the effective config, each value with its source")
    check.add_argument("--results", default="results")
    check.set_defaults(func=cmd_check_config)

    doctor = sub.add_parser(
        "doctor",
        help="what this environment can run: frameworks, builds, devices, LaTeX, and which studies in config/",
        description="Each framework found with its version (against the tested one), its build and the device it "
        "would compute on (asked in a fresh process each, as the device check asks), the GPUs the NVIDIA driver "
        "lists, LaTeX and the browser, and for every study file in config/ whether it can run here as it is. Where the "
        "driver lists no GPU the builds are read from the installed files (no import; --probe asks anyway). Starts "
        "no study.",
    )
    doctor.add_argument("--studies", default="config", metavar="DIR", help="where the study files are (config/)")
    doctor.add_argument(
        "--probe",
        action="store_true",
        help="ask each framework what it computes on even where the NVIDIA driver lists no GPU (seconds per framework)",
    )
    doctor.set_defaults(func=cmd_doctor)

    archive = sub.add_parser(
        "archive",
        help="write a study's results as one compressed file that another checkout can restore",
        description="Every cell JSON, table, figure, log and job time under STUDY_DIR/results, with a manifest of "
        "the study (its files and effective config), the code (commit and digests), the measuring machine, and "
        "Snakemake's records of each file; not the dataset shards, starting weights or micro operands, which the "
        "workflow writes again from the seed (docs/elsewhere.md).",
    )
    archive.add_argument("study_dir", metavar="STUDY_DIR", help="where snakemake ran the study (holds results/)")
    archive.add_argument("out", metavar="OUT", help="the archive to write (an xz-compressed tar, e.g. study.tar.xz)")
    _study_options(archive, f"the study file(s) it ran with, as given to --configfile (default: {DEFAULT_STUDY})")
    archive.set_defaults(func=cmd_archive)

    restore = sub.add_parser(
        "restore",
        help="restore an archive into this checkout, so snakemake builds the paper without measuring",
        description="Checks the whole archive before writing anything: members only under results/ (no absolute "
        "path, '..', link or device file), every file against its digest, the code against this checkout's, the "
        "study against the archive's, and results/ without cells of its own. Then the usual snakemake command "
        "builds the tables, figures and paper without a measuring job.",
    )
    restore.add_argument("archive", metavar="ARCHIVE", help="a file written by fwbench archive")
    restore.add_argument("--into", default=".", metavar="DIR", help="the checkout to restore into (default: .)")
    restore.add_argument(
        "--report-only",
        action="store_true",
        help="restore what was measured, even by other code, so that this checkout's code writes the report again "
        "(default study: the archive's own, written to results/archived-study.yaml)",
    )
    _study_options(restore, "the study file(s) (default: the archive's)")
    restore.set_defaults(func=cmd_restore)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "data_dir", "unset") is None:
        args.data_dir = str(Path(args.results, "data"))
    try:
        return args.func(args)
    except (ConfigError, DeviceCheckError, ArchiveError, ValueError, KeyError) as exc:
        print(f"fwbench: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `fwbench check-config | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
