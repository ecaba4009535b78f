"""The eager-CPU fast paths give what the general (device, compiled) paths give.

Host draws (numpy) vs int64 tensor draws, ``RandomCrop``'s one-``index_select`` copy vs
the slices and the gathers, ``RandomGaussianBlur``'s chunked 2D convolution vs the
separable grouped convolutions, and ``apply_where``'s ``rest``.
"""

import threading

import pytest
import torch
from harness import assert_within, summation_order_bound

import preprocessing as pp
from preprocessing import _random, crop, gaussian_blur
from preprocessing._photometric import apply_where

CPU = torch.device("cpu")


# ---------------------------------------------------------------------- draws
@pytest.mark.parametrize("seed", [0, 1, -1, 123, 2**63 - 1, -(2**63), 2**64 - 1])
@pytest.mark.parametrize("counter", [0, 1, 7, 2**31, 2**62 + 5])
def test_host_draws_are_bit_identical_to_tensor_draws(seed, counter):
    for shape in [(), (5,), (2, 64), (0,), (3, 0), (1000,)]:
        host = _random._hashed_uniform_host(seed, counter, shape)
        tensor = _random._hashed_uniform_torch(seed, counter, shape, CPU)
        assert host.dtype == torch.float32 and host.shape == torch.Size(shape)
        assert torch.equal(host, tensor), (seed, counter, shape)


def test_hashed_uniform_keeps_its_stream():
    # The values of the int64 tensor version before the host path existed.
    expected = {
        (0, 0): [14819496, 7239838, 443485, 16288696],
        (123, 5): [2155248, 6963786, 3051640, 10051082],
        (-1, 2**40): [13055586, 735525, 14538337, 5528060],
        (2**64 - 1, 3): [4325804, 7497415, 3284136, 16086625],
    }
    for (seed, counter), bits in expected.items():
        want = torch.tensor(bits, dtype=torch.float32) * 2.0**-24
        for c in (counter, torch.tensor(counter)):
            assert torch.equal(_random.hashed_uniform(seed, c, (4,), CPU), want)
        assert torch.equal(_random._hashed_uniform_torch(seed, counter, (4,), CPU), want)


def test_large_draws_take_the_tensor_path(monkeypatch):
    n = _random.HOST_DRAW_MAX + 1
    # Value k depends on (seed, counter, k) only: a small (host) draw is a large one's start.
    start = _random.hashed_uniform(5, 2, (10,), CPU)
    calls = []
    monkeypatch.setattr(_random, "_hashed_uniform_host", lambda *a: calls.append(a))
    u = _random.hashed_uniform(5, 2, (n,), CPU)
    assert calls == [] and u.shape == (n,)
    assert torch.equal(u, _random._hashed_uniform_torch(5, 2, (n,), CPU))
    assert torch.equal(u[:10], start)


def test_counter_counts_every_draw_once_across_threads():
    layer = pp.RandomRotation(0.1, seed=4)
    numbers: list = []

    def work():
        for _ in range(200):
            numbers.append(layer._next_draw())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(numbers) == list(range(800)) and all(type(n) is int for n in numbers)
    assert layer._draws.dtype == torch.int64 and int(layer._draws) == 800


def test_seeded_layer_draws_equal_the_tensor_stream():
    layer = pp.RandomCrop(4, 5, seed=11)
    x = torch.rand(6, 3, 9, 9)
    for counter in range(3):
        params = layer.get_random_transformation(x)
        u = _random._hashed_uniform_torch(11, counter, (2, 6), CPU)
        assert torch.equal(params["top"], (u[0] * 6).long())
        assert torch.equal(params["left"], (u[1] * 5).long())


# ----------------------------------------------------------------------- crop
def _gathered(x, top, left, height, width):
    """crop_windows's device path (two gathers), run on CPU."""
    b, c, h, w = x.shape
    rows = top.view(b, 1) + torch.arange(height)
    cols = left.view(b, 1) + torch.arange(width)
    x = x.gather(2, rows.view(b, 1, height, 1).expand(b, c, height, w))
    return x.gather(3, cols.view(b, 1, 1, width).expand(b, c, height, width))


@pytest.mark.parametrize(
    "shape,size",
    [
        ((5, 3, 11, 13), (4, 6)),
        ((1, 1, 7, 7), (7, 7)),
        ((3, 2, 6, 9), (1, 9)),
        ((2, 4, 5, 8), (5, 1)),
    ],
)
def test_crop_windows_copy_equals_slices_and_gathers(shape, size):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.rand(shape, generator=g)
    (b, _, h, w), (height, width) = shape, size
    top = torch.randint(0, h - height + 1, (b,), generator=g)
    left = torch.randint(0, w - width + 1, (b,), generator=g)
    top[0], left[-1] = h - height, w - width  # the last window at both far edges
    out = crop.crop_windows(x, top, left, height, width)
    assert out.shape == (b, shape[1], height, width) and out.is_contiguous()
    for i in range(b):
        t, s = int(top[i]), int(left[i])
        assert torch.equal(out[i], x[i, :, t : t + height, s : s + width])
    assert torch.equal(out, _gathered(x, top, left, height, width))
    # A copy, not a view of x.
    assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_crop_windows_strided_and_tracked_inputs():
    base = torch.rand(4, 10, 12, 3)
    x = base.permute(0, 3, 1, 2)  # channels_last strides: the per-image slices path
    top, left = torch.tensor([0, 2, 5, 1]), torch.tensor([3, 0, 4, 4])
    assert torch.equal(crop.crop_windows(x, top, left, 5, 8), _gathered(x, top, left, 5, 8))
    shifted = torch.rand(5, 3, 10, 12)[1:]  # contiguous, at a storage offset
    assert shifted.storage_offset() > 0 and shifted.is_contiguous()
    want = _gathered(shifted, top, left, 5, 8)
    assert torch.equal(crop.crop_windows(shifted, top, left, 5, 8), want)
    tracked = torch.rand(4, 3, 10, 12, requires_grad=True)
    out = crop.crop_windows(tracked, top, left, 5, 8)
    out.sum().backward()
    assert tracked.grad is not None
    assert int(tracked.grad.sum()) == 4 * 3 * 5 * 8 and float(tracked.grad.max()) == 1.0
    assert float(tracked.grad[1, :, 0, 0].sum()) == 0.0  # image 1's window starts at (2, 0)


def test_crop_windows_outside_the_image_raise():
    x = torch.rand(2, 3, 8, 8)
    for top, left in (([0, 5], [0, 0]), ([0, 0], [-1, 0]), ([0, 0], [0, 6])):
        with pytest.raises(ValueError, match="crop_windows: 4x3 windows .* do not fit in 8x8"):
            crop.crop_windows(x, torch.tensor(top), torch.tensor(left), 4, 3)


def test_random_crop_layer_matches_its_params():
    layer = pp.RandomCrop(6, 7, seed=2)
    x = torch.rand(5, 3, 10, 11)
    params = pp.RandomCrop(6, 7, seed=2).get_random_transformation(x)
    out = layer(x)
    assert torch.equal(out, _gathered(x, params["top"], params["left"], 6, 7))


# ----------------------------------------------------------------------- blur
BLUR_CASES = [
    ((4, 3, 17, 19), (5, 5), torch.float32),
    ((3, 2, 9, 8), (3, 7), torch.float32),
    ((2, 3, 12, 10), (1, 5), torch.float64),
    ((2, 1, 6, 11), (7, 1), torch.float32),
    ((3, 3, 2, 3), (5, 5), torch.float32),  # smaller than the kernel's reach: replicated
    ((3, 2, 12, 13), (9, 3), torch.float32),  # wider than MAX_2D_SIDE: separable
    ((2, 3, 9, 9), (3, 3), torch.bfloat16),
]


def _reference_blur(x, sigma, size):
    """The separable grouped convolutions in float64 (the device / compiled path)."""
    b, _, h, w = x.shape
    kx, ky = size
    mode = "reflect" if kx // 2 < w and ky // 2 < h else "replicate"
    taps = [gaussian_blur.gaussian_taps(sigma[:, i].double(), k) for i, k in enumerate(size)]
    return gaussian_blur._blur_once(x.double(), None, taps[0], taps[1], mode)


@pytest.mark.parametrize("shape,size,dtype", BLUR_CASES)
def test_cpu_blur_equals_separable_convolutions(shape, size, dtype, monkeypatch):
    g = torch.Generator().manual_seed(shape[2])
    x = (torch.rand(shape, generator=g) * 1.4 - 0.2).to(dtype)
    sigma = 0.2 + 2.0 * torch.rand(shape[0], 2, generator=g)
    want = _reference_blur(x, sigma, size)
    atol = {torch.float32: 1e-6, torch.float64: 1e-12, torch.bfloat16: 2e-2}[dtype]
    out = gaussian_blur.blur(x, sigma, size)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), want, rtol=0, atol=atol)
    clipped = gaussian_blur.blur(x, sigma, size, clip=(0.0, 1.0))
    torch.testing.assert_close(clipped.double(), want.clamp(0.0, 1.0), rtol=0, atol=atol)
    assert float(clipped.min()) >= 0.0 and float(clipped.max()) <= 1.0
    # Chunks of one image and of two (a shorter last one), and the path of other devices
    # and torch.compile (the batch at once), give the same values up to the order of the
    # kernel's sums: oneDNN picks its convolution by the number of groups (one image is
    # not a depthwise convolution) and by the CPU's vector width, so the bits are not
    # defined across them (39 values 1 ulp apart on an AMD EPYC, equal on a Xeon).
    bound = summation_order_bound(x, size[0] * size[1])  # the 2D kernel's products
    for images in (1, 2):
        monkeypatch.setattr(gaussian_blur, "CHUNK_IMAGES", images)
        assert_within(gaussian_blur.blur(x, sigma, size, clip=(0.0, 1.0)), clipped, bound)
        assert_within(gaussian_blur.blur(x, sigma, size), out, bound)
    monkeypatch.setattr(gaussian_blur.torch.compiler, "is_compiling", lambda: True)
    assert_within(gaussian_blur.blur(x, sigma, size, clip=(0.0, 1.0)), clipped, bound)


def test_narrow_gaussians_have_no_denormal_weights():
    sigma = torch.tensor([0.145, 0.16, 0.2, 1.0])
    taps = gaussian_blur.gaussian_taps(sigma, 5)
    tiny = torch.finfo(torch.float32).eps ** 2
    assert bool(((taps == 0) | (taps >= tiny)).all())
    assert taps[0, 0] == 0 and taps[0, 1] > 0  # exp(-2 / 0.145**2) ~ 5e-42 before
    assert taps[3].tolist() == pytest.approx([0.0545, 0.2442, 0.4026, 0.2442, 0.0545], abs=1e-4)
    torch.testing.assert_close(taps.sum(1), torch.ones(4), rtol=0, atol=2.5e-7)
    # The 2D kernel of two narrow axes (products below eps**2) is flushed too.
    kernel = gaussian_blur.flush_weights(taps[2].view(5, 1) * taps[2].view(1, 5))
    assert kernel[0, 0] == 0 and bool(((kernel == 0) | (kernel >= tiny)).all())
    x = torch.rand(4, 3, 10, 10)
    out = gaussian_blur.blur(x, torch.stack([sigma, sigma], 1), (5, 5))
    torch.testing.assert_close(
        out.double(), _reference_blur(x, torch.stack([sigma, sigma], 1), (5, 5)), rtol=0, atol=1e-6
    )


def test_blur_of_strided_and_tracked_inputs():
    x = torch.rand(3, 14, 15, 3).permute(0, 3, 1, 2)  # channels_last strides
    sigma = torch.tensor([[0.5, 1.5], [1.0, 1.0], [2.0, 0.3]])
    want = _reference_blur(x, sigma, (5, 5))
    out = gaussian_blur.blur(x, sigma, (5, 5))
    torch.testing.assert_close(out.double(), want, rtol=0, atol=1e-6)
    tracked = x.contiguous().requires_grad_(True)
    out = gaussian_blur.blur(tracked, sigma, (5, 5), clip=(0.0, 1.0))  # autograd works
    out.sum().backward()
    assert tracked.grad is not None and tracked.grad.shape == tracked.shape
    assert float(tracked.grad.abs().sum()) > 0
    torch.testing.assert_close(out.detach().double(), want.clamp(0, 1), rtol=0, atol=1e-6)


def test_gaussian_blur_layer_clips_blurred_and_kept_images():
    layer = pp.RandomGaussianBlur(0.5, 5, (0.1, 2.0), value_range=(0, 1), seed=21)
    twin = pp.RandomGaussianBlur(0.5, 5, (0.1, 2.0), value_range=(0, 1), seed=21)
    x = torch.rand(8, 3, 12, 13) * 1.6 - 0.3  # values outside the range
    params = twin.get_random_transformation(x)
    mask = params["should_apply_blur"]
    assert 0 < int(mask.sum()) < 8  # some blurred, some kept
    sigma = params["blur_factor"]
    taps = [gaussian_blur.gaussian_taps(sigma[:, i], 5) for i in (0, 1)]
    blurred = gaussian_blur._blur_once(x, None, taps[0], taps[1], "reflect")
    want = torch.where(mask.view(-1, 1, 1, 1), blurred, x).clamp(0.0, 1.0)
    out = layer(x)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-6)
    assert torch.equal(out[~mask], x[~mask].clamp(0.0, 1.0))  # kept ones: exactly clipped


def test_apply_where_rest_maps_the_kept_samples():
    x = torch.arange(4.0).view(4, 1, 1, 1)

    def fn(s, i):
        return s * 10

    def rest(s):
        return s + 0.5

    for mask, want in (
        ([True, False, True, True], [0.0, 1.5, 20.0, 30.0]),
        ([False] * 4, [0.5, 1.5, 2.5, 3.5]),
        ([True] * 4, [0.0, 10.0, 20.0, 30.0]),
    ):
        out = apply_where(x, torch.tensor(mask), fn, rest=rest)
        assert out.flatten().tolist() == want
        assert apply_where(x, torch.tensor(mask), fn).flatten().tolist() == [
            10.0 * v if m else v for v, m in zip(x.flatten().tolist(), mask)
        ]
    assert x.flatten().tolist() == [0.0, 1.0, 2.0, 3.0]  # the input is kept
    empty = apply_where(x[:0], torch.zeros(0, dtype=torch.bool), fn, rest=rest)
    assert empty.shape == (0, 1, 1, 1)


def test_two_summation_orders_differ_in_bits_but_stay_within_the_bound():
    # Why the blur comparisons take a bound (issue 27): the same weighted sums, added up
    # front to back and back to front in float32 (element-wise, so each order's bits are
    # defined), differ in their last bits -- as two convolution kernels do -- yet never by
    # more than harness.summation_order_bound; a difference past it still fails.
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4096, 25, generator=g) * 1.4 - 0.2
    w = torch.rand(25, generator=g)
    w = w / w.sum()
    forward, backward = torch.zeros(4096), torch.zeros(4096)
    for i in range(25):
        forward = forward + w[i] * x[:, i]
        backward = backward + w[24 - i] * x[:, 24 - i]
    assert not torch.equal(forward, backward)  # an exact-bits check fails here ...
    bound = summation_order_bound(x, 25)
    assert_within(forward, backward, bound)  # ... the bound holds
    with pytest.raises(AssertionError, match="summation-order bound"):
        assert_within(forward + 2 * bound, backward, bound)
