//! Which 3x3 stride-1 layers the compiler gives to the blocked Winograd convolution on their
//! own merit (`blocked::winograd_pays`): a ResNet bottleneck's 64 -> 64 at 56x56 runs blocked
//! (converted on the way in and out: its neighbours are 1x1 layers, which stay NCHW), a 256
//! -> 256 one on the same map stays on the NCHW Winograd (the blocked one re-packs each
//! point's wide filters per block of tiles and was no faster there); a DenseNet layer's 128 ->
//! 32 runs blocked down to 14x14 maps, not on 7x7 ones; a SqueezeNet fire module's 3x3
//! expansion (16 to 64 channels in) runs blocked on its 54x54 and 27x27 maps, not on 13x13.

use kiln_dsl::syntax::NetworkDef;

/// The lines of `net`'s blocked plan that list its blocked convolutions.
fn blocked_convs(net: proc_macro2::TokenStream) -> Vec<String> {
    let def: NetworkDef = syn::parse2(net).unwrap();
    let plan = kiln_dsl::compile(&def, None).unwrap().plan_text();
    let Some((_, blocked)) = plan.split_once("blocked convolutions (NCHW16c):\n") else {
        return Vec::new();
    };
    blocked
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_bottleneck_runs_its_3x3_layer_through_the_blocked_winograd() {
    let convs = blocked_convs(quote::quote! {
        net Bottleneck(x: fm<256xf32[56,56]>) -> fm<256xf32[56,56]> {
            let a = conv2d(x, r1: weights<256 -> 1x1xf32 -> 64>).relu();
            let a = conv2d(a, r2: weights<64 -> 3x3xf32 -> 64>, pad = 1).relu();
            let a = add(conv2d(a, r3: weights<64 -> 1x1xf32 -> 256>), x).relu();
            conv2d(a, w: weights<256 -> 3x3xf32 -> 256>, pad = 1).relu()
        }
    });
    assert_eq!(convs.len(), 1, "{convs:#?}");
    assert!(
        convs[0].contains("fm<64xf32[56,56]> -> fm<64xf32[56,56]> (winograd F(4x4,3x3))"),
        "{convs:#?}"
    );
}

/// The blocked convolutions of a DenseNet-121 layer (1x1 bottleneck to 128, then 3x3 to 32)
/// on a `size` x `size` map.
fn dense_layer(size: usize) -> Vec<String> {
    let size = proc_macro2::Literal::usize_unsuffixed(size);
    blocked_convs(quote::quote! {
        net Dense(x: fm<256xf32[#size,#size]>) -> fm<32xf32[#size,#size]> {
            let a = conv2d(x, b: weights<256 -> 1x1xf32 -> 128>).relu();
            conv2d(a, c: weights<128 -> 3x3xf32 -> 32>, pad = 1)
        }
    })
}

#[test]
fn narrow_layers_run_blocked_down_to_14x14() {
    let convs = dense_layer(14);
    assert_eq!(convs.len(), 1, "{convs:#?}");
    assert!(
        convs[0].contains("fm<128xf32[14,14]> -> fm<32xf32[14,14]> (winograd F(4x4,3x3))"),
        "{convs:#?}"
    );
    assert_eq!(dense_layer(7), Vec::<String>::new());
}

/// The blocked convolutions of a SqueezeNet 1.0 fire module on a `size` x `size` map: a 1x1
/// squeeze of 256 channels to `s`, then 1x1 and 3x3 expansions to `e` each, concatenated.
fn fire(size: usize, s: usize, e: usize) -> Vec<String> {
    let lit = proc_macro2::Literal::usize_unsuffixed;
    // `128xf32` is one token: an integer with the suffix `xf32`.
    let out = syn::LitInt::new(&format!("{}xf32", 2 * e), proc_macro2::Span::call_site());
    let (size, s, e) = (lit(size), lit(s), lit(e));
    blocked_convs(quote::quote! {
        net Fire(x: fm<256xf32[#size,#size]>) -> fm<#out[#size,#size]> {
            let q = conv2d(x, sq: weights<256 -> 1x1xf32 -> #s>).relu();
            let a = conv2d(q, e1: weights<#s -> 1x1xf32 -> #e>).relu();
            let b = conv2d(q, e3: weights<#s -> 3x3xf32 -> #e>, pad = 1).relu();
            concat(a, b)
        }
    })
}

#[test]
fn fire_modules_run_their_3x3_expansion_blocked_down_to_27x27() {
    for (size, s, e) in [(54, 16, 64), (54, 32, 128), (27, 48, 192), (27, 64, 256)] {
        let convs = fire(size, s, e);
        assert_eq!(convs.len(), 1, "{size}x{size}, {s} -> {e}: {convs:#?}");
        let layer = format!("fm<{s}xf32[{size},{size}]> -> fm<{e}xf32[{size},{size}]>");
        assert!(
            convs[0].contains(&format!("{layer} (winograd F(4x4,3x3))")),
            "{convs:#?}"
        );
    }
    assert_eq!(fire(13, 64, 256), Vec::<String>::new());
}
