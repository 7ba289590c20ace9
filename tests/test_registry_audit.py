"""Every mmseg decode head, neck and loss (and mmdet's Mask2Former / MaskFormer parts) that
can sit on a ViT-5 trains a step and predicts on CPU and through the CUDA-dispatch
simulation; docs/gpus.md shows exactly the table this produces."""
import pytest

from conftest import REPO
from vit5seg import registry_audit


@pytest.fixture(scope='module')
def results():
    return registry_audit.audit()


def test_every_registered_head_neck_and_loss_is_audited_or_said_why_not():
    from mmseg.registry import MODELS
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    kinds = {'.decode_heads.': 'head', '.necks.': 'neck', '.losses.': 'loss'}
    registered = {name for name, cls in MODELS.module_dict.items() if any(k in cls.__module__ for k in kinds)
                  and cls.__module__.startswith('mmseg')}
    covered = {c.name for c in registry_audit.cases()} | set(registry_audit.NOT_APPLICABLE)
    assert registered - covered == set()


@pytest.mark.slow  # the audit: about 35 s on 2 cores
def test_nothing_fails_and_the_fallbacks_are_the_expected_ones(results):
    verdicts = {r.name: r.verdict for r in results}
    assert not [f'{n}: {v}' for n, v in verdicts.items() if v.startswith('fails')]
    assert verdicts['Mask2FormerHead'] == 'works through a pure-PyTorch fallback (`ms_deform_attn`)'
    assert verdicts['FocalLoss'] == 'works through a pure-PyTorch fallback (`sigmoid_focal_loss`)'
    assert verdicts['PSAHead'] == 'works through a pure-PyTorch fallback (`psa_mask`)'
    assert verdicts['UPerHead'] == 'works'


@pytest.mark.slow
def test_docs_show_the_table(results):
    table = registry_audit.markdown_table(results)
    assert table in (REPO / 'docs' / 'gpus.md').read_text(), (
        'docs/gpus.md is out of date; the table is now:\n' + table)
