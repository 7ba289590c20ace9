#!/usr/bin/env python
"""Print the fully resolved config (all _base_ files merged, --cfg-options applied), or with
--card the recipe card: every value a training run will use, for a number of GPUs."""
import argparse
import contextlib
import logging
import sys

from mmengine.config import Config, DictAction
from mmengine.logging import MMLogger

import vit5seg  # noqa: F401  (lets mmseg:: bases resolve)
from vit5seg.engine.accumulation import config_micro_batches
from vit5seg.engine.launch import run_tool
from vit5seg.engine.recipe import protocol_gpus
from vit5seg.engine.card import card
from vit5seg.utils.config_kinds import refuse_all_tasks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('config', help='config file path')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config values, key=value')
    parser.add_argument('--save', help='also write the resolved config to this file')
    parser.add_argument('--card', action='store_true',
                        help='print the recipe card: images per iteration, the lr used, optimizer, schedule, losses, '
                             'augmentation, evaluation, precision, with the defaults the classes fill in')
    parser.add_argument('--gpus', type=int,
                        help='with --card: training processes (default: the config\'s own, base_batch_size / '
                             'train_dataloader.batch_size)')
    parser.add_argument('--accumulate', metavar='auto|N',
                        help='with --card: as tools/train.py --accumulate, an iteration made one optimizer step '
                             'of N micro-batches (default: auto, as dist_train.sh, slurm_train.sh and run_seeds.py '
                             'pass it, a plain tools/train.py run is 1; a config\'s own '
                             'optim_wrapper.accumulative_counts keeps mmengine\'s meaning)')
    args = parser.parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    if args.card:
        refuse_all_tasks(cfg, args.config, 'recipe card')
        # the card alone on stdout: what mmengine and the constructors log while it is built goes to stderr
        for handler in MMLogger.get_current_instance().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                handler.setStream(sys.stderr)
        # no --accumulate: auto, as dist_train.sh, slurm_train.sh and run_seeds.py pass it; a config's own
        # accumulative_counts is kept (mmengine's way, or a run's saved config)
        accumulate = args.accumulate or (None if config_micro_batches(cfg) > 1 else 'auto')
        with contextlib.redirect_stdout(sys.stderr):  # mmseg's constructors print() their groups
            text = card(cfg, args.gpus or protocol_gpus(cfg), accumulate, args.config).text()
        print(text)
    else:
        print(cfg.pretty_text)
    if args.save:
        cfg.dump(args.save)


if __name__ == '__main__':
    run_tool(main)  # a plan the GPUs, batch and accumulation cannot give: one line, exit 1
