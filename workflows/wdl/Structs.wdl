version 1.0

# GATK-SV's RuntimeAttr (wdl/Structs.wdl): CNMOPS.wdl's runtime overrides. Inside a GATK-SV checkout, GATK-SV's own
# Structs.wdl is the one imported.
struct RuntimeAttr {
    Float? mem_gb
    Int? cpu_cores
    Int? disk_gb
    Int? boot_disk_gb
    Int? preemptible_tries
    Int? max_retries
}
