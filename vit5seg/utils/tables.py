"""CSV tables the analysis tools write."""
import csv
from pathlib import Path
from typing import List, Sequence


def write_csv(path, fields: Sequence[str], rows: List[dict]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
