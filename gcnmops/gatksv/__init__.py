"""A drop-in for GATK-SV's cn.MOPS step (wdl/CNMOPS.wdl and the scripts of src/WGD/bin it runs), byte for byte:
``runcnmops`` (runcnMOPS.R), ``workflow`` (cnMOPS_workflow.sh), ``clean`` (cleancnMOPS.sh and the CleanCNMops
task) and ``cnmops`` (a whole CNMOPS.wdl call in one process). docs/gatk-sv.md says how to swap it in."""
