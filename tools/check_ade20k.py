#!/usr/bin/env python
"""Count ADE20K images and labels per split and report what does not pair up."""
import argparse
import sys

from vit5seg.datasets import check_ade20k, format_report


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('root', nargs='?', default='data/ade/ADEChallengeData2016',
                        help='the ADEChallengeData2016 folder (default: %(default)s)')
    parser.add_argument('--values', action='store_true',
                        help='also read every label: single channel, ids <= 150, same size as its image')
    args = parser.parse_args()
    try:
        reports = check_ade20k(args.root, check_values=args.values)
    except FileNotFoundError as e:
        sys.exit(f'error: {e}')
    print(format_report(reports))
    sys.exit(0 if all(r.ok for r in reports) else 1)


if __name__ == '__main__':
    main()
