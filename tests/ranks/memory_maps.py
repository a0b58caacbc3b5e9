"""What the kernel says about this process's memory (/proc/self/smaps)."""
import os

HUGE_PAGES = os.path.exists("/sys/kernel/mm/transparent_hugepage")
HUGE = 2 << 20  # x86-64's; a whole one lies inside any buffer of 4 MiB or more


def huge_page_advised(address: int) -> bool:
    """Whether the mapping that holds ``address`` was asked for transparent huge pages (its VmFlags: hg)."""
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                start, end = (int(x, 16) for x in first.split("-"))
                inside = start <= address < end
            elif inside and first == "VmFlags:":
                return "hg" in line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def inner_huge_page(address: int) -> int:
    """The start of a whole huge page inside a buffer of 4 MiB or more that starts at ``address``."""
    return (address + HUGE - 1) & ~(HUGE - 1)
