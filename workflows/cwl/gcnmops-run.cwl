#!/usr/bin/env cwl-runner
cwlVersion: v1.2
class: CommandLineTool
id: gcnmops-run
label: "gcnmops run: cn.MOPS copy number variant calls from a read-count matrix (CPU or NVIDIA GPU)"
doc: |
  Runs cn.MOPS (Klambauer et al. 2012, doi:10.1093/nar/gks003) as reimplemented by gcnmops on a read-count
  matrix (regions x samples: TSV/CSV, Parquet, .rds, .npz, or the output of `gcnmops count`) and returns the
  result folder: call tables (segmentation, CNVs, CNV regions), params.json (cn.mops's parameters and what made
  the folder: version, command line, date, backend, input fingerprint), BED, SEG, the per-region matrices, a VCF of
  the CNV regions and, with per_sample_vcf, one VCF per sample. `gcnmops` must be on PATH (pip install gcnmops;
  GPUs: gcnmops[cuda12] or gcnmops[cuda13]). The tool an nf-core module would wrap.
baseCommand: [gcnmops, run]
arguments:
  - {prefix: -o, valueFrom: $(inputs.outdir_name)}
  - --quiet
requirements:
  InlineJavascriptRequirement: {}
hints:
  SoftwareRequirement:
    packages:
      gcnmops:
        specs: ["https://pypi.org/project/gcnmops/"]
  ResourceRequirement:
    coresMin: 1
inputs:
  counts:
    type: File
    doc: read-count matrix (regions x samples), format by extension
    inputBinding: {position: 1}
  method:
    type:
      - "null"
      - type: enum
        symbols: [cn.mops, exome, haplo]
    doc: cn.mops (whole genome, default), exome (target regions) or haplo (haploid genomes)
    inputBinding: {prefix: --method}
  backend:
    type:
      - "null"
      - type: enum
        symbols: [auto, cpu, gpu]
    doc: where the model runs (default auto; the GPU where one is usable)
    inputBinding: {prefix: --backend}
  formats:
    type: string?
    doc: result formats, comma separated (default parquet,bed,vcf,seg; tsv, tsv.gz, rds too)
    inputBinding: {prefix: --formats}
  per_sample_vcf:
    type: boolean?
    doc: also one cnvr.<sample>.vcf.gz per sample (the CNV regions it carries)
    inputBinding: {prefix: --per-sample-vcf}
  reference_fai:
    type: File?
    doc: the reference's .fai (contig lengths of the VCF header)
    inputBinding: {prefix: --reference-fai}
  prior_impact:
    type: float?
    doc: cn.mops's priorImpact (default 1)
    inputBinding: {prefix: --prior-impact}
  min_width:
    type: int?
    doc: cn.mops's minWidth, the fewest consecutive windows of a CNV (default 3; exome 5)
    inputBinding: {prefix: --min-width}
  threads:
    type: int?
    doc: CPU threads of the CPU stages (default all)
    inputBinding: {prefix: --threads}
  extra_args:
    type: string[]?
    doc: more options of gcnmops run, e.g. ["--norm-type", "median"] (gcnmops run --help lists them)
    inputBinding: {position: 2}
  outdir_name:
    type: string
    default: gcnmops_out
    doc: name of the result folder
outputs:
  results:
    type: Directory
    doc: every result file
    outputBinding: {glob: $(inputs.outdir_name)}
  params:
    type: File
    doc: params.json (cn.mops's parameters and provenance)
    outputBinding: {glob: $(inputs.outdir_name)/params.json}
  cnvs:
    type: File
    doc: cnvs.tsv, the CNVs of every sample
    outputBinding: {glob: $(inputs.outdir_name)/cnvs.tsv}
  cnvr:
    type: File
    doc: cnvr.tsv, the CNV regions with each sample's copy number
    outputBinding: {glob: $(inputs.outdir_name)/cnvr.tsv}
  vcf:
    type: File?
    doc: cnvr.vcf.gz (+ index), one record per CNV region
    secondaryFiles: [{pattern: .tbi, required: false}, {pattern: .csi, required: false}]
    outputBinding: {glob: $(inputs.outdir_name)/cnvr.vcf.gz}
  sample_vcfs:
    type: File[]
    doc: cnvr.<sample>.vcf.gz (+ index) per sample, with per_sample_vcf
    secondaryFiles: [{pattern: .tbi, required: false}, {pattern: .csi, required: false}]
    outputBinding: {glob: $(inputs.outdir_name)/cnvr.*.vcf.gz}
