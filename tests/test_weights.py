"""The shared starting point: seeded or from a local torchvision file, adapted as torchvision would, recorded."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fwbench.models import jax_forward, torch_model
from fwbench.models.weights import init_weights, read_provenance
from fwbench.scenarios.inference import load_weights


def test_seeded_start_is_reproducible_and_recorded(tmp_path):
    a = init_weights("small_cnn", num_classes=4, image_size=16, seed=7, out=tmp_path / "a.npz")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=7, out=tmp_path / "b.npz")
    wa, wb = load_weights(tmp_path / "a.npz"), load_weights(tmp_path / "b.npz")
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert a["source"] == "random" and "manual_seed(7)" in a["description"]
    assert read_provenance(tmp_path / "a.npz")["weights_sha256"] == a["weights_sha256"]


def test_pretrained_vit_is_interpolated_and_gets_a_new_head(tmp_path):
    torch.manual_seed(123)
    reference = torch_model("vit_b_16", num_classes=1000, image_size=224)
    file_state = reference.state_dict()
    torch.save(file_state, tmp_path / "vit.pth")
    record = init_weights(
        "vit_b_16", num_classes=10, image_size=32, seed=0, out=tmp_path / "vit.npz", pretrained=tmp_path / "vit.pth"
    )
    weights = load_weights(tmp_path / "vit.npz")
    assert record["source"] == "pretrained" and len(record["sha256"]) == 64
    assert weights["encoder.pos_embedding"].shape == (1, 5, 768)
    assert weights["heads.head.weight"].shape == (10, 768)
    assert any("pos_embedding interpolated" in note for note in record["adaptations"])
    assert any("heads.head.weight" in note for note in record["adaptations"])
    for key in ("conv_proj.weight", "encoder.layers.encoder_layer_5.self_attention.in_proj_weight", "class_token"):
        np.testing.assert_array_equal(weights[key], file_state[key].numpy(), err_msg=key)
    # the class token's position is kept, the patch grid is resized
    np.testing.assert_array_equal(weights["encoder.pos_embedding"][:, :1], file_state["encoder.pos_embedding"][:, :1])

    # both frameworks start from exactly these weights
    model = torch_model("vit_b_16", num_classes=10, image_size=32).eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    images = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(images)).numpy()
    logits = jax_forward("vit_b_16", weights, images, num_classes=10, image_size=32)
    assert np.abs(logits - expected).max() <= 1e-4 * np.abs(expected).max()


def test_pretrained_file_that_does_not_fit_is_a_clear_error(tmp_path):
    torch.save(torch_model("resnet50", num_classes=1000, image_size=224).state_dict(), tmp_path / "resnet.pth")
    with pytest.raises(ValueError, match=r"pretrained\.mobilenet_v3_small = .*resnet\.pth.* does not fit"):
        init_weights(
            "mobilenet_v3_small",
            num_classes=10,
            image_size=32,
            seed=0,
            out=tmp_path / "m.npz",
            pretrained=tmp_path / "resnet.pth",
        )
    torch.save({"not": "tensors"}, tmp_path / "junk.pth")
    with pytest.raises(ValueError, match="not a state_dict of tensors"):
        init_weights(
            "small_cnn", num_classes=10, image_size=32, seed=0, out=tmp_path / "s.npz", pretrained=tmp_path / "junk.pth"
        )


def test_fan_in_head_init_redraws_only_the_head(tmp_path):
    torchvision_start = init_weights("efficientnet_b0", num_classes=10, image_size=32, seed=3, out=tmp_path / "t.npz")
    record = init_weights(
        "efficientnet_b0", num_classes=10, image_size=32, seed=3, out=tmp_path / "f.npz", head_init="fan_in"
    )
    tv, fan_in = load_weights(tmp_path / "t.npz"), load_weights(tmp_path / "f.npz")
    changed = sorted(k for k in tv if not np.array_equal(tv[k], fan_in[k]))
    assert changed == ["classifier.1.bias", "classifier.1.weight"]
    bound = 1 / np.sqrt(1280)
    assert np.abs(fan_in["classifier.1.weight"]).max() <= bound < np.abs(tv["classifier.1.weight"]).max() / 5
    assert np.abs(fan_in["classifier.1.weight"]).max() > 0.9 * bound  # drawn over the whole range, not shrunk
    assert record["head_init"] == "fan_in" and "1/sqrt(1280)" in record["description"]
    assert torchvision_start["head_init"] == "torchvision" and "head" not in torchvision_start["description"]
    again = init_weights(
        "efficientnet_b0", num_classes=10, image_size=32, seed=3, out=tmp_path / "g.npz", head_init="fan_in"
    )
    assert again["weights_sha256"] == record["weights_sha256"], "the redraw is part of the one seeded start"
    with pytest.raises(ValueError, match="head_init = 'zero'"):
        init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "z.npz", head_init="zero")


def _eval_logits(model: str, path, images_nchw: np.ndarray) -> np.ndarray:
    import torch

    from fwbench.models import torch_model

    module = torch_model(model, num_classes=10, image_size=32)
    module.load_state_dict({k: torch.from_numpy(v) for k, v in load_weights(path).items()}, strict=False)
    with torch.no_grad():
        return module.eval()(torch.from_numpy(images_nchw)).numpy()


def test_calibrated_batchnorm_statistics_make_the_logits_depend_on_the_image(tmp_path):
    """The study's start calibrates BatchNorm on its training images: EfficientNet-B0's eval logits then vary with the
    image, where with the initialisation's statistics (the negative control, calibration off) they are the same for
    every image and a twin that ignored its input would pass parity."""
    from fwbench.models.calibration import MIN_INPUT_DEPENDENCE, input_dependence
    from fwbench.models.weights import calibration_batches

    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    batches = calibration_batches(train, 33)  # 16 + 17: the one-image remainder joins the batch before it
    assert [len(b) for b in batches] == [16, 17] and batches[0].shape[1:] == (3, 32, 32)
    common = dict(num_classes=10, image_size=32, seed=0, head_init="fan_in")
    record = init_weights("efficientnet_b0", out=tmp_path / "c.npz", calibration=batches, **common)
    plain = init_weights("efficientnet_b0", out=tmp_path / "p.npz", **common)
    assert record["bn_calibration_images"] == 33 and "calibrated on 33 training images" in record["description"]
    assert "calibration off" in plain["bn_statistics"]
    images = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    assert input_dependence(_eval_logits("efficientnet_b0", tmp_path / "c.npz", images)) > 100 * MIN_INPUT_DEPENDENCE
    assert input_dependence(_eval_logits("efficientnet_b0", tmp_path / "p.npz", images)) < MIN_INPUT_DEPENDENCE
    again = init_weights("efficientnet_b0", out=tmp_path / "again.npz", calibration=batches, **common)
    assert again["weights_sha256"] == record["weights_sha256"], "calibration is deterministic: one start for all"
    vit = init_weights("vit_b_16", out=tmp_path / "v.npz", calibration=batches, **common)
    assert vit["bn_statistics"] == "none (no BatchNorm)"
