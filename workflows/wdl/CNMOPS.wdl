version 1.0

import "Structs.wdl"

## GATK-SV's cn.MOPS step (wdl/CNMOPS.wdl) as one GPU task: `gcnmops gatk-sv cnmops` runs every contig x sex mode x
## rebin pass of the call (the CNSampleNormal tasks) from one read of the bincov matrix, then CleanCNMops, and
## writes the same files. Same inputs and outputs as GATK-SV's workflow: swap it in by pointing
## GatherBatchEvidence.wdl's `import "CNMOPS.wdl" as cnmops` at this file (docs/gatk-sv.md).

workflow CNMOPS {
  input {
    String r1
    String r2
    String batch
    File bincov_matrix
    File chrom_file
    File bincov_matrix_index
    File ped_file
    File exclude_list
    File allo_file
    File ref_dict
    Array[String] samples  # !UnusedDeclaration
    String prefix
    Int? min_size
    Boolean? stitch_and_clean_large_events = false  # !UnnecessaryQuantifier (GATK-SV's declaration)
    String linux_docker  # !UnusedDeclaration
    String sv_pipeline_docker  # !UnusedDeclaration
    String cnmops_docker
    RuntimeAttr? runtime_attr_sample10  # !UnusedDeclaration
    RuntimeAttr? runtime_attr_sample3  # !UnusedDeclaration
    RuntimeAttr? runtime_attr_ped  # !UnusedDeclaration
    RuntimeAttr? runtime_attr_clean  # !UnusedDeclaration

    # gcnmops's own (all optional): its image (default cnmops_docker), the GPU, where cn.mops runs, the task's
    # resources
    String? gcnmops_docker
    String gpu_type = "nvidia-tesla-t4"
    Int gpu_count = 1
    String backend = "auto"
    RuntimeAttr? runtime_attr_gcnmops
  }

  parameter_meta {
    bincov_matrix_index: "unused: the matrix is read whole, once"
    ref_dict: "unused: PrintSVEvidence's contig selection is done in gcnmops"
    samples: "unused, as in GATK-SV's workflow: CleanCNMops takes the samples from the ped file"
    runtime_attr_sample10: "unused: no per-pass tasks"
    runtime_attr_sample3: "unused: no per-pass tasks"
    runtime_attr_ped: "unused: CleanCNMops runs in the same task"
    runtime_attr_clean: "unused, as in GATK-SV's workflow"
    backend: "auto (a usable GPU, else the CPU), gpu or cpu"
  }

  call GcnmopsCNMOPS {
    input:
      r1 = r1,
      r2 = r2,
      batch = batch,
      bincov_matrix = bincov_matrix,
      chrom_file = chrom_file,
      allo_file = allo_file,
      ped_file = ped_file,
      exclude_list = exclude_list,
      prefix = prefix,
      min_size = min_size,
      stitch_and_clean_large_events = select_first([stitch_and_clean_large_events, false]),
      docker = select_first([gcnmops_docker, cnmops_docker]),
      gpu_type = gpu_type,
      gpu_count = gpu_count,
      backend = backend,
      runtime_attr_override = runtime_attr_gcnmops
  }

  output {
    File Del = GcnmopsCNMOPS.Del
    File Dup = GcnmopsCNMOPS.Dup
    File Del_idx = GcnmopsCNMOPS.Del_idx
    File Dup_idx = GcnmopsCNMOPS.Dup_idx
  }
}

task GcnmopsCNMOPS {
  input {
    String r1
    String r2
    String batch
    File bincov_matrix
    File chrom_file
    File allo_file
    File ped_file
    File exclude_list
    String prefix
    Int? min_size
    Boolean stitch_and_clean_large_events
    String docker
    String gpu_type
    Int gpu_count
    String backend
    RuntimeAttr? runtime_attr_override
  }

  # the matrix's cells in memory as int32 (~4 GiB per bgzipped GiB) plus two passes' working sets (chr1 at the
  # smaller rebin factor; ~19 GiB for 500 samples): peak 25 GB for a 1.4-GiB matrix, 91 GB for a whole genome's
  # 14.4 GiB (500 samples, 100-bp bins; benchmarks/RESULTS.md)
  Float mem_gb_base = 24.0
  Float mem_gb_scale = 6.0
  Float mem_gb = mem_gb_base + mem_gb_scale * size(bincov_matrix, "GiB")
  Int disk_gb = 10 + ceil(2.0 * size(bincov_matrix, "GiB"))
  RuntimeAttr default_attr = object {
    cpu_cores: 8,
    mem_gb: mem_gb,
    disk_gb: disk_gb,
    boot_disk_gb: 10,
    preemptible_tries: 3,
    max_retries: 1
  }
  RuntimeAttr runtime_attr = select_first([runtime_attr_override, default_attr])

  command <<<
    set -euo pipefail
    gcnmops gatk-sv cnmops \
      --bincov-matrix ~{bincov_matrix} \
      --chrom-file ~{chrom_file} \
      --allo-file ~{allo_file} \
      --ped-file ~{ped_file} \
      --exclude-list ~{exclude_list} \
      --r1 ~{r1} \
      --r2 ~{r2} \
      --batch ~{batch} \
      --prefix ~{prefix} \
      ~{"--min-size " + min_size} \
      ~{if stitch_and_clean_large_events then "--stitch-and-clean-large-events" else ""} \
      --backend ~{backend} \
      --devices all \
      -o .
  >>>

  output {
    File Del = "~{batch}.DEL.~{prefix}.bed.gz"
    File Del_idx = "~{batch}.DEL.~{prefix}.bed.gz.tbi"
    File Dup = "~{batch}.DUP.~{prefix}.bed.gz"
    File Dup_idx = "~{batch}.DUP.~{prefix}.bed.gz.tbi"
    Array[File] Gffs = glob("passes/*/cnMOPS.cnMOPS.gff")
  }

  runtime {
    cpu: select_first([runtime_attr.cpu_cores, default_attr.cpu_cores])
    memory: select_first([runtime_attr.mem_gb, default_attr.mem_gb]) + " GiB"
    disks: "local-disk " + select_first([runtime_attr.disk_gb, default_attr.disk_gb]) + " HDD"
    bootDiskSizeGb: select_first([runtime_attr.boot_disk_gb, default_attr.boot_disk_gb])
    docker: docker
    gpuType: gpu_type
    gpuCount: gpu_count
    preemptible: select_first([runtime_attr.preemptible_tries, default_attr.preemptible_tries])
    maxRetries: select_first([runtime_attr.max_retries, default_attr.max_retries])
    noAddress: true
  }
}
