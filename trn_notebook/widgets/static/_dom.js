// The DOM helpers every trn-notebook widget shares, written once and prepended to each widget's own ESM file
// (trn_notebook/widgets/_base.py, esm()): el() builds an element whose text goes through textContent only,
// svg() an SVG element. No maths, no formatting: figures arrive formatted by the kernel.

const SVG = "http://www.w3.org/2000/svg";

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}
