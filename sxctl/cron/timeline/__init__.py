"""A job's future: the occurrences of its schedule (`schedule`, DST arithmetic in `occurrences`),
the fate of each one (`fate`: run, catch up, skip, hold, give up, expire, pause), the counts its
limits spend (`limits`), what a late run stands for (`catchup`) and the catch-up budget (`burst`).
The pass admits due jobs by it (`admission`) and every view shows it (`previews`, `views`).
This package imports nothing: import from the module."""
