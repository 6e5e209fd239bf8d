//! PNG copies of the SVG figures, rasterized by `resvg` with the DejaVu
//! Sans font built in (from the `dejavu` crate), so that a figure's text
//! looks the same on every machine, with or without fonts installed.

use std::sync::OnceLock;

use resvg::tiny_skia::{Color, Pixmap, Transform};
use resvg::usvg::{Options, Tree};

/// Why an SVG could not become a PNG.
#[derive(Debug, thiserror::Error)]
pub enum PngError {
    /// The SVG text did not parse.
    #[error("SVG: {0}")]
    Svg(String),
    /// The figure has no area, or is too large to rasterize.
    #[error("a {width}x{height} figure at scale {scale} cannot be rasterized")]
    Size {
        /// Width in SVG units.
        width: f32,
        /// Height in SVG units.
        height: f32,
        /// The scale asked for.
        scale: f32,
    },
    /// The PNG encoder failed.
    #[error("PNG encoding: {0}")]
    Encode(String),
}

/// Parsing options with the built-in fonts as the only ones (loaded once).
fn options() -> &'static Options<'static> {
    static OPTIONS: OnceLock<Options<'static>> = OnceLock::new();
    OPTIONS.get_or_init(|| {
        let mut opt = Options::default();
        let db = opt.fontdb_mut();
        db.load_font_data(dejavu::sans::regular().to_vec());
        db.load_font_data(dejavu::sans::bold().to_vec());
        db.set_sans_serif_family("DejaVu Sans");
        opt
    })
}

/// Rasterizes `svg` on a white background at `scale` pixels per SVG unit
/// (2 gives figures sharp enough for slides and papers).
pub fn png_from_svg(svg: &str, scale: f32) -> Result<Vec<u8>, PngError> {
    let tree = Tree::from_str(svg, options()).map_err(|e| PngError::Svg(e.to_string()))?;
    let size = tree.size();
    let too_large = |w: f32, h: f32| w * h > 100e6;
    let (w, h) = (size.width() * scale, size.height() * scale);
    let pixmap = (scale > 0.0 && !too_large(w, h))
        .then(|| Pixmap::new(w.ceil() as u32, h.ceil() as u32))
        .flatten();
    let Some(mut pixmap) = pixmap else {
        return Err(PngError::Size {
            width: size.width(),
            height: size.height(),
            scale,
        });
    };
    pixmap.fill(Color::WHITE);
    resvg::render(
        &tree,
        Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PngError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes the PNG's size and the colours of a few pixels.
    fn pixels(png: &[u8]) -> Pixmap {
        Pixmap::decode_png(png).expect("a PNG")
    }

    #[test]
    fn a_figure_becomes_a_png_of_its_size_with_its_shapes_and_text() {
        let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" font-family="sans-serif" font-size="20">
<rect x="0" y="0" width="50" height="50" fill="#ff0000"/>
<text x="100" y="80">Figure</text></svg>"##;
        let png = png_from_svg(svg, 2.0).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let p = pixels(&png);
        assert_eq!((p.width(), p.height()), (400, 200));
        let at = |x: u32, y: u32| p.pixel(x, y).unwrap();
        assert_eq!(
            (at(10, 10).red(), at(10, 10).green()),
            (255, 0),
            "the red square"
        );
        assert_eq!(at(390, 10).green(), 255, "white background");
        // The text is drawn with the built-in font: dark pixels where it
        // stands, none without it.
        let dark = |p: &Pixmap| {
            (200..400)
                .flat_map(|x| (110..170).map(move |y| (x, y)))
                .filter(|&(x, y)| p.pixel(x, y).unwrap().green() < 128)
                .count()
        };
        assert!(dark(&p) > 100, "no text drawn: {}", dark(&p));
        let blank = pixels(&png_from_svg(&svg.replace("Figure", ""), 2.0).unwrap());
        assert_eq!(dark(&blank), 0);
    }

    #[test]
    fn bad_svg_and_sizes_are_errors() {
        assert!(matches!(png_from_svg("<svg", 1.0), Err(PngError::Svg(_))));
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>"#;
        assert!(matches!(png_from_svg(svg, 0.0), Err(PngError::Size { .. })));
        assert!(matches!(png_from_svg(svg, 1e6), Err(PngError::Size { .. })));
    }
}
