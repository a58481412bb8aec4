"""The stages in order: cn.mops (cnmops: the only code that knows the stage order), the family
(exome/haplo/reference/single), the device-resident GPU path (resident_gpu), the family by name (methods:
entry points and parameter checks from params.METHODS) and run -> integer copy numbers -> files (run)."""
