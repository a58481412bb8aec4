"""Where a run's time goes, inside one process: the pipeline's stages and sub-stages, then each output writer
alone (serially, so their costs do not hide behind each other), then the whole write as ``gcnmops run`` does it.

    python benchmarks/bench_stages.py bma.npz --backend gpu

Prints seconds per step. Complements bench_cli.py (fresh processes, where imports and CUDA start-up count).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def timed(label: str, fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    print(f"  {label:34s} {time.perf_counter() - t0:8.3f} s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("counts")
    ap.add_argument("--backend", default="auto")
    opts = ap.parse_args()
    t0 = time.perf_counter()
    import gcnmops
    from gcnmops.calls.integer import calc_integer_copy_numbers
    from gcnmops.outputs import callfiles, tracks, writers
    from gcnmops.pipeline.family import cnvr_per_sample
    print(f"  {'import gcnmops':34s} {time.perf_counter() - t0:8.3f} s")

    data = timed("read_counts", gcnmops.read_counts, opts.counts)
    for attempt in ("first", "second"):
        print(f"pipeline ({attempt} in this process)")
        result = timed("cn_mops", gcnmops.cn_mops, data, backend=opts.backend)
        for key, value in {**result.timings, **(result.gpu_stats or {})}.items():
            if isinstance(value, float):
                print(f"    {key:32s} {value:8.3f}")
        result = timed("calc_integer_copy_numbers", calc_integer_copy_numbers, result, backend=opts.backend)
    result = result.replace(cnvr=cnvr_per_sample(result))
    print("writers, one at a time")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        timed("chromosome_blocks(gr)", gcnmops.data.chromosome_blocks, result.gr["seqnames"])
        timed("bed_cnvs", callfiles.bed_cnvs, result)
        timed("bed_cnvr", callfiles.bed_cnvr, result)
        timed("seg_table", tracks.seg_table, result)
        timed("vcf_table", callfiles.vcf_table, result)
        timed("write_vcf (plain)", callfiles.write_vcf, result, out / "a.vcf", compress=False)
        for fmt in ("bed", "seg", "vcf", "parquet"):
            timed(f"write_result [{fmt}]", writers.write_result, result, out / fmt, formats=[fmt])
        timed("write_result [defaults]", writers.write_result, result, out / "all")


if __name__ == "__main__":
    main()
