#!/usr/bin/env python
"""Print the fully resolved config (all _base_ files merged, --cfg-options applied)."""
import argparse

from mmengine.config import Config, DictAction

import vit5seg  # noqa: F401  (lets mmseg:: bases resolve)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('config', help='config file path')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config values, key=value')
    parser.add_argument('--save', help='also write the resolved config to this file')
    args = parser.parse_args()
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    print(cfg.pretty_text)
    if args.save:
        cfg.dump(args.save)


if __name__ == '__main__':
    main()
