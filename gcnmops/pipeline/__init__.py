"""The stages in order: cn.mops (cnmops: the only code that knows the stage order), the family
(exome/haplo/reference/single), and the device-resident GPU path (resident_gpu)."""
